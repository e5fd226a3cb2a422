"""GPT-J (model_type gptj): EleutherAI's 6B model, an early parallel block with rotary positions.

Each block applies one LayerNorm and hands its output to both the attention and the MLP; the two
results are added to the stream together, so attention and MLP of one block work side by side. The
attention is plain multi-head, with separate query, key and value projections and no biases. Rotary
positions turn only the first rotary_dim dims of each head, in pairs of adjacent dims; the rest of
each head carries no position. The MLP is two layers, four times the width, with the tanh-approximated
GELU and biases. The output head is a matrix of its own and carries a bias.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY


def _tiny_rotary(config):
    """The same share of each head rotated at the tiny sizes: rotary_dim scaled with the head's width."""
    tiny_head = TINY["hidden_size"] // TINY["num_attention_heads"]
    head = config.n_embd // config.n_head
    return {"rotary_dim": max(2, tiny_head * config.rotary_dim // head)}


FAMILY = Family(
    title="GPT-J",
    vendor="EleutherAI",
    released="2021-06",
    summary=(
        "A parallel block under one LayerNorm, multi-head attention with rotary positions on part of each "
        "head in adjacent pairs, a GELU MLP, and an untied head with a bias."
    ),
    tags=("Parallel attention and MLP", "Partial rotary", "LayerNorm", "GELU MLP"),
    checkpoint="EleutherAI/gpt-j-6b",
    model_class="GPTJForCausalLM",
    config_class="GPTJConfig",
    preview=_tiny_rotary,
)
