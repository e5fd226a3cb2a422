"""Pythia (model_type gpt_neox): EleutherAI's research suite, built on the GPT-NeoX block.

Each block runs its attention and its MLP side by side rather than one after the other: the attention
reads the stream through one LayerNorm, the MLP reads the very same stream through a second LayerNorm,
and both results are added to the stream in one sum (use_parallel_residual). The MLP therefore never
sees what the attention of its own block wrote. Attention is plain multi-head, with one fused
projection whose output holds each head's query, key and value next to one another, and every
projection carries a bias. Positions are rotary, applied to only the first quarter of each head's
dimensions (rotary_pct); the rest of every head carries no position. The MLP is two layers with the
exact GELU, and the output head is a matrix of its own.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Pythia",
    vendor="EleutherAI",
    released="2023-02",
    summary=(
        "The GPT-NeoX block: attention and MLP side by side on the same input, each through its own "
        "LayerNorm, rotary positions on part of each head, biases everywhere."
    ),
    tags=("Parallel attention and MLP", "Partial rotary", "LayerNorm", "GELU MLP"),
    checkpoint="EleutherAI/pythia-6.9b",
    sizes=("EleutherAI/pythia-70m", "EleutherAI/pythia-160m", "EleutherAI/pythia-410m", "EleutherAI/pythia-1b",
           "EleutherAI/pythia-1.4b", "EleutherAI/pythia-2.8b", "EleutherAI/pythia-12b"),
    model_class="GPTNeoXForCausalLM",
    config_class="GPTNeoXConfig",
)
