"""Phi-2 (model_type phi): Microsoft's small model, a parallel block with one shared LayerNorm.

Each block normalises the stream once, and hands that one normalised tensor to both its attention and
its MLP; their two outputs are added to the stream together, so the MLP never sees the attention of
its own block and one LayerNorm serves both. The attention is plain multi-head with separate query,
key and value projections and an output projection, all with biases. Rotary positions turn only a part
of each head's dimensions (partial_rotary_factor); the remaining dimensions carry no position. The
MLP is two layers with the tanh-approximated GELU. The output head is a separate matrix and, unusually,
carries a bias of its own.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Phi-2",
    vendor="Microsoft",
    released="2023-12",
    summary=(
        "A parallel block: one LayerNorm feeds both the attention and the MLP, whose outputs are added "
        "together; rotary positions on part of each head, biases everywhere, a head with a bias."
    ),
    tags=("Parallel attention and MLP", "Partial rotary", "LayerNorm", "GELU MLP"),
    checkpoint="microsoft/phi-2",
    model_class="PhiForCausalLM",
    config_class="PhiConfig",
)
