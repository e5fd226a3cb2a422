"""Nemotron (model_type nemotron): NVIDIA's Nemotron-4 decoder, with a LayerNorm that learns an offset from one and an ungated squared-ReLU MLP.

Each block is pre-norm: a LayerNorm, grouped-query attention, the residual add, a second LayerNorm and
the MLP. The LayerNorms keep a bias and apply their weight as one plus the stored value, so a stored
zero means no scaling (NeMo's "LayerNorm1P"). Rotary positions turn only part of each head. The MLP is
two matrices, up and down, with a squared ReLU between them and no gate. No projection has a bias, and
the output head is a separate matrix. This checkpoint is Minitron-4B, pruned and distilled from
Nemotron-4 15B.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Nemotron",
    vendor="NVIDIA",
    released="2024-07",
    summary=(
        "A grouped-query decoder with LayerNorms whose gain is one plus the stored weight, partial rotary "
        "positions and an ungated squared-ReLU MLP."
    ),
    tags=("LayerNorm", "Squared ReLU", "Ungated MLP", "Partial rotary", "Dense"),
    checkpoint="nvidia/Minitron-4B-Base",
    model_class="NemotronForCausalLM",
    config_class="NemotronConfig",
)
