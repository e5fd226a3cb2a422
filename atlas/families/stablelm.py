"""StableLM (model_type stablelm): Stability AI's LayerNorm decoder with a gated SiLU MLP and partial rotary.

Token embeddings start the residual stream; there is no position table. Each block is pre-norm with
LayerNorm (mean-centred, with a learned shift): input_layernorm, multi-head attention, add; post_attention_layernorm, a gated
SiLU MLP (gate, up and down projections), add. Queries and keys are rotated on their
first quarter of dimensions only (partial_rotary_factor; use_qkv_bias is false in this checkpoint). A
final LayerNorm precedes an untied output head.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="StableLM",
    vendor="Stability AI",
    released="2023-09",
    summary=(
        "Llama's gated SiLU MLP and multi-head attention under mean-centring LayerNorm, rotary positions on a "
        "quarter of each head, an untied head."
    ),
    tags=("LayerNorm", "Partial rotary"),
    checkpoint="stabilityai/stablelm-3b-4e1t",
    model_class="StableLmForCausalLM",
    config_class="StableLmConfig",
)
