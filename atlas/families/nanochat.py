"""nanochat (model_type nanochat): Karpathy's small end-to-end chat model, a plain decoder whose every norm
is a weightless RMS norm, drawn from the depth-32 run.

The stream is normalised once right after the embedding, before the first block. Each block is pre-norm:
attention with rotary positions whose queries and keys are RMS-normalised after the rotation, and an
ungated MLP with a squared ReLU. No norm has a learned gain and no projection a bias. The head is its own
matrix, and its logits are soft-capped by a tanh.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="nanochat",
    vendor="Andrej Karpathy",
    released="2025-10",
    summary=(
        "A plain decoder with weightless RMS norms everywhere, queries and keys normalised after their "
        "rotation, a squared-ReLU MLP and soft-capped logits."
    ),
    tags=("Q/K norm", "Squared ReLU", "Ungated MLP", "Logit softcap", "Dense"),
    checkpoint="karpathy/nanochat-d32",
    model_class="NanoChatForCausalLM",
    config_class="NanoChatConfig",
)
