"""BitNet b1.58 (model_type bitnet): Microsoft's Llama-shaped decoder trained for ternary weights, with a
norm inside each sublayer and a squared-ReLU feed-forward.

Each block normalises the stream and runs grouped-query attention with rotary positions, then
normalises again and runs a gated feed-forward whose gate goes through a squared ReLU instead of SiLU.
Both sublayers carry a sub-norm of their own: the attention's heads are RMS-normalised across the full
width before the output projection, and the feed-forward's gated product is RMS-normalised across its
inner width before the down projection, so each output projection reads a stream of fixed scale. In
the ternary release every projection's weights are -1, 0 or 1 times one scale per matrix, and each
projection's input is quantized to eight bits per token; the bf16 release pinned here holds the master
weights, which the model runs unquantized. The head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="BitNet b1.58",
    vendor="Microsoft",
    released="2025-04",
    summary=(
        "A Llama-shaped decoder trained for ternary weights, with a sub-norm before each output "
        "projection and a squared-ReLU gated feed-forward."
    ),
    tags=("Ternary weights", "Sub-norms", "Dense"),
    checkpoint="microsoft/bitnet-b1.58-2B-4T-bf16",
    model_class="BitNetForCausalLM",
    config_class="BitNetConfig",
)
