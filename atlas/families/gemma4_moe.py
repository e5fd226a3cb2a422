"""Gemma 4 26B-A4B (model_type gemma4): Gemma 4's text model with a mixture of experts run beside the dense MLP in every block.

The attention is the 31B's: five sliding-window blocks to one global block whose wider heads take
their values from the key projection. What differs is the feed-forward part. Every block keeps a
small dense GeGLU MLP and adds, side by side with it, a mixture of many small experts held by the
block itself. The router reads the stream before the MLP's norm, normalizes it without a gain, scales
it by a learned gain over the square root of the width, takes a softmax over one logit per expert,
keeps the top k, renormalizes them and multiplies each by a learned number of its expert. The experts
read the stream through a norm of their own; the dense MLP's output and the experts' weighted sum
each pass a norm before they are added, and the block's post-MLP norm then normalizes the sum.
"""

from atlas.families.gemma4 import FAMILY as GEMMA4

FAMILY = GEMMA4.but(
    title="Gemma 4 (26B-A4B)",
    summary=(
        "Gemma 4's sliding/global text model with a mixture of 128 small experts beside a small dense MLP in "
        "every block, each token sent to 8 of them."
    ),
    tags=("Sliding/global pattern", "Per-layer head sizes", "Keys as values", "Mixture of experts", "Multimodal wrapper"),
    checkpoint="google/gemma-4-26B-A4B",
)
