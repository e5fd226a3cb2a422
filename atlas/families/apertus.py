"""Apertus (model_type apertus): the Swiss open model, a Llama-like decoder whose MLP has no gate and a learned activation.

Attention is the familiar grouped-query kind with rotary positions (llama3-stretched frequencies), with
one addition: an RMSNorm over each head's queries and keys before the rotation. The MLP departs from
the SwiGLU most decoders use: there is no gate projection, only an up projection, an activation, and a
down projection, which lets the inner width grow for the same parameter budget. The activation is
xIELU, which squares positive inputs (plus a linear term) and treats negative ones with a saturating
exponential; its two shape numbers are learned per layer, so the activation is part of the weights.
Norms come before each sublayer, there are no biases, and the output head is a separate matrix.
"""

from atlas.inputs.family import Family


def preview(config):
    """The preview runs in float32, but transformers builds the xIELU activation's two learned numbers
    in the config's dtype (bfloat16 here) and takes their softplus in it; the tiny config names
    float32 so that the activation computes at the precision of the rest of the run."""
    return {"dtype": "float32"}


FAMILY = Family(
    title="Apertus",
    vendor="Swiss AI Initiative",
    released="2025-09",
    summary=(
        "A grouped-query decoder with per-head q/k norms and an ungated MLP whose xIELU activation "
        "carries learned parameters in every layer."
    ),
    tags=("Q/K norm", "Ungated MLP", "xIELU", "Dense"),
    checkpoint="swiss-ai/Apertus-8B-2509",
    model_class="ApertusForCausalLM",
    config_class="ApertusConfig",
    preview=preview,
)
