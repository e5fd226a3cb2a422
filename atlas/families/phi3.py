"""Phi-3 (model_type phi3): a Llama-style decoder whose projections are fused into fewer, wider matrices.

The computation is the pre-norm RMSNorm / rotary attention / SwiGLU block, but the weights are packed:
qkv_proj produces queries, keys and values in one matrix that is split by width, and gate_up_proj
produces the gate and the up projection together, chunked in two before silu(gate) * up. The mini
checkpoint has as many key/value heads as query heads (plain multi-head attention) and a sliding
window in its config, which transformers applies to every layer.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Phi-3",
    vendor="Microsoft",
    released="2024-04",
    summary=(
        "A pre-norm decoder with fused projections: one matrix for queries, keys and values, and one for "
        "the SwiGLU gate and up projections."
    ),
    tags=("Fused QKV", "Fused gate/up", "SwiGLU", "Dense"),
    checkpoint="microsoft/Phi-3-mini-4k-instruct",
    sizes=("microsoft/Phi-3-medium-4k-instruct",),
    model_class="Phi3ForCausalLM",
    config_class="Phi3Config",
)
