"""Gemma 4 (model_type gemma4): the text model of a multimodal wrapper, five sliding-window blocks to one global block with wider heads.

The checkpoint is a multimodal wrapper; the atlas describes its text model and counts the vision
encoder apart. Each block keeps Gemma's sandwich of RMSNorms around attention and around the GeGLU
MLP, and ends by multiplying its output by one stored number of its own (layer_scalar). The blocks
are not all alike: five of every six attend within a sliding window with narrow heads, and the sixth
attends over the whole prefix with heads twice as wide and fewer key/value heads, the per-layer sizes
transformers keeps in the configuration's per_layer_config. On those global blocks there is no value
projection: the key projection's output serves as the values too (attention_k_eq_v), and their
rotary angles turn only the first quarter of each head's pairs (proportional RoPE), the remaining pairs
keeping an angle of zero. Queries and keys pass through RMSNorms with a gain, values through one
without a gain, and the scores are not divided by the square root of the head width. The embedding is
scaled by the square root of the width, the head is tied to it, and the logits are soft-capped.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Gemma 4 (31B)",
    vendor="Google",
    released="2026-04",
    summary=(
        "The text model of Gemma's multimodal wrapper: sandwich-normed blocks, five sliding-window blocks "
        "to one global block whose wider heads use the key projection as values."
    ),
    tags=("Sliding/global pattern", "Per-layer head sizes", "Keys as values", "Sandwich norms", "Multimodal wrapper"),
    checkpoint="google/gemma-4-31B-it",
    model_class="Gemma4ForCausalLM",
    config_class="Gemma4TextConfig",
    config_section="text_config",
    wrapper_class="Gemma4ForConditionalGeneration",
    not_applicable={
        "block_sum": "each block multiplies its whole output by its stored layer_scalar, so the input plus the two "
                     "sublayers' outputs equals layer_output divided by that number; the block's proven steps apply it",
    },
)
