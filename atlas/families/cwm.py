"""CWM (model_type cwm): Meta's Code World Model, a Llama 3 block with three sliding-window layers to every global one.

Each block is Llama 3's: an RMSNorm, grouped-query attention with rotary positions, the residual add, a
second RMSNorm and a SwiGLU MLP, with no biases. What sets it apart is the layer pattern: every fourth
layer, starting with the first, attends to the whole context, and the three between attend only to a
window of recent positions, which keeps most of the KV cache bounded at long context. Rotary
frequencies carry Llama 3's long-context stretch. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="CWM",
    vendor="Meta FAIR",
    released="2025-09",
    summary=(
        "A Llama-style decoder whose layers alternate three sliding-window attentions with one global, with a "
        "llama3-stretched rotary and a SwiGLU MLP."
    ),
    tags=("Sliding window", "SwiGLU", "Dense"),
    checkpoint="facebook/cwm",
    model_class="CwmForCausalLM",
    config_class="CwmConfig",
)
