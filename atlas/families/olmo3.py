"""OLMo 3 (model_type olmo3): OLMo 2's post-norm block with three sliding-window layers to every global one.

Like OLMo 2, a block feeds the residual stream straight into attention and into the MLP and normalises
each sublayer's output before adding it back (post_attention_layernorm, post_feedforward_layernorm);
queries and keys pass through an RMSNorm as wide as the whole projection, all heads at once, before
they are split into heads and rotated. What is new is the layer pattern: three layers in every four
attend only to a window of recent positions, and every fourth layer sees the whole context. The two
kinds of layer also get their own rotary tables: the YaRN stretch in rope_scaling applies to the
global layers, while the windowed layers keep plain rotary frequencies with the same base. Every
head has its own keys and values (no grouping), there are no biases, the MLP is SwiGLU, and the
output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="OLMo 3",
    vendor="Allen Institute for AI",
    released="2025-11",
    summary=(
        "A post-norm decoder with full-width q/k norms, sliding-window attention in three layers of every four and "
        "YaRN-stretched rotary positions on the global layers only."
    ),
    tags=("Post-norm sublayers", "Q/K norm", "Sliding window", "YaRN", "SwiGLU", "Dense"),
    checkpoint="allenai/Olmo-3-1025-7B",
    model_class="Olmo3ForCausalLM",
    config_class="Olmo3Config",
)
