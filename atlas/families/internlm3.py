"""InternLM3 (model_type internlm3): Shanghai AI Laboratory's 8B decoder, run by transformers on Llama's classes.

transformers has no InternLM3 model of its own: its configuration class maps the released keys (qkv_bias,
bias) onto Llama's switches and the model is LlamaForCausalLM. A block is the Llama arrangement: an
RMSNorm, grouped-query attention with rotary positions, the residual add, a second RMSNorm and a SwiGLU
MLP, with no biases anywhere. The attention is strongly grouped, many query heads to each key/value
head, and the rotary base is very large; the rope settings ask for dynamic NTK scaling, which changes
the frequencies only for sequences longer than the trained context. The output head is a separate
matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="InternLM3",
    vendor="Shanghai AI Laboratory",
    released="2025-01",
    summary=(
        "A Llama-shaped grouped-query decoder without biases, with a very large rotary base and dynamic "
        "NTK scaling past its trained context."
    ),
    tags=("SwiGLU", "Dense"),
    checkpoint="internlm/internlm3-8b-instruct",
    model_class="LlamaForCausalLM",
    config_class="InternLM3Config",
    config_overrides={"architectures": ["LlamaForCausalLM"]},
    override_reasons={"architectures": (
        "the released file names InternLM3ForCausalLM, the class of the Hub repository's remote code; transformers "
        "has no class of that name and builds the model type internlm3 as LlamaForCausalLM")},
)
