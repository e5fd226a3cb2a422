"""RecurrentGemma (model_type recurrent_gemma): Griffin's blocks, two recurrent mixers for every local attention.

Each block normalises the stream, runs one temporal mixer and adds it back, then normalises again and
runs a gated GeLU feed-forward. The mixers follow block_types in a repeating pattern: two recurrent
blocks, then one local attention. A recurrent block splits the normalised stream into two branches of
lru_width channels. One branch is linear_y followed by a GeLU; the other is linear_x, a causal depthwise
convolution over the last conv1d_width positions, and then the RG-LRU, a real-gated linear recurrent
unit. The RG-LRU computes two gates per channel from block-diagonal weights (one block per head): an
input gate i and a recurrence gate r. Its decay a = exp(-8 · r · softplus(Λ)) is formed in log space
from a learned vector Λ, and its state follows h_t = a_t h_{t-1} + sqrt(1 - a_t²) (i_t x_t), with the
state cleared and the square-root factor replaced by 1 at the first position. The state is one number
per channel, whatever the context. The product of the two branches goes through linear_out. The
attention blocks are multi-query attention (one key/value head) over a sliding window, with rotary
positions on half of each head's channels. The embedding is multiplied by sqrt(hidden_size), every
RMSNorm scales by (1 + weight), the feed-forward's two inner projections are each half of
intermediate_size wide, the recurrent block, the feed-forward and the attention's output projection carry
biases (its query, key and value projections do not), the head is tied to the embedding, and the logits
are soft-capped.
"""

from atlas.inputs.family import Family


def preview(config) -> dict:
    """The RG-LRU's width follows the tiny stream (lru_width is its own key, which the generic rule does not
    shrink); the width is 48, whose square root is not a bfloat16 number, so the run tells a scale rounded to
    bfloat16 (as the model holds it) from the exact square root."""
    return {"hidden_size": 48, "lru_width": 48}


FAMILY = Family(
    title="RecurrentGemma",
    vendor="Google",
    released="2024-04",
    summary=(
        "Griffin: gated linear recurrences (RG-LRU) with a short convolution in two blocks out of three "
        "and local multi-query attention in the third; a fixed state per recurrent block."
    ),
    tags=("RG-LRU", "Hybrid", "Sliding window", "Logit softcap", "Tied embeddings"),
    checkpoint="google/recurrentgemma-2b",
    model_class="RecurrentGemmaForCausalLM",
    config_class="RecurrentGemmaConfig",
    preview=preview,
    not_applicable={
        "embeddings": "the model multiplies the embedding rows by the square root of hidden_size (rounded to bfloat16) "
                      "before block 0, outside the embedding module",
        "logits": "the model soft-caps the head's logits, logits_soft_cap · tanh(z / logits_soft_cap), before it returns them",
    },
)
