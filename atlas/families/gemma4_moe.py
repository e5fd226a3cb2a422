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
        "The dense model's sliding/global attention with a mixture of many small experts beside a small dense MLP in "
        "every block, each token sent to a few of them."
    ),
    tags=("Sliding/global pattern", "Per-layer head sizes", "Keys as values", "Multimodal wrapper"),
    checkpoint="google/gemma-4-26B-A4B",
    # The mixture is the block's own (router and experts beside the MLP), where the generic rule looks
    # inside the MLP: its values are read at the block's children.
    not_applicable={
        **GEMMA4.not_applicable,
        "mixture_sum": "the block's MLP is dense; the routed experts run beside it, and the two outputs are each "
                       "normalized before they are summed, so routed_output alone is not the MLP's output",
        "expert_slots": "the experts are the block's own module, outside the MLP, and return their weighted sum "
                        "directly: no per-slot outputs are captured to sum",
        "expert_weights_sum": "after the top-k weights are renormalized to one, the router multiplies each by its "
                              "expert's learned per_expert_scale, so they do not sum to a fixed number",
    },
    standard_overrides={
        "router_logits": "layers[i].router.proj.output",
        "expert_weights": "layers[i].router.output[1]",
        "expert_indices": "layers[i].router.output[2]",
        "routed_output": "layers[i].post_feedforward_layernorm_2.input[0]",
    },
)
