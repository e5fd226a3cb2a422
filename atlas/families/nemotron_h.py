"""Nemotron-H (model_type nemotron_h): a hybrid stack where each block holds exactly one mixer.

Every block normalises the residual stream with an RMSNorm, runs one mixer and adds its output back;
which mixer is fixed per block by hybrid_override_pattern ("M" a Mamba-2 layer, "*" attention, "-" a
plain MLP). Most blocks are Mamba-2 layers; a few attention blocks are spread through the depth and
MLP blocks sit between the others, so the model reads its context mostly through a fixed-size
recurrent state and only occasionally through a key/value cache.

A Mamba-2 layer projects the stream once into a gate z, the scan input x, the shared input and output
projections B and C (one pair per group of heads) and one time step per head. x, B and C pass through
a short causal depthwise convolution and a SiLU. Each head then keeps a state of head_dim × state_size
numbers that decays by exp(Δ·A) at every position (A is a negative scalar per head, Δ the softplus of
the time step plus a bias) and takes in Δ·x·Bᵀ; the head's output reads the state with C and adds a
skip D·x. The heads' outputs are multiplied by SiLU(z), normalised by a grouped RMSNorm and projected
back to the width. The attention blocks use grouped-query attention with no positional encoding at all:
order reaches them only through the Mamba layers before. The MLP blocks square a ReLU (relu2) between
an up and a down projection, with no gate. No biases except the convolution's, and the output head is
its own matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Nemotron-H",
    vendor="NVIDIA",
    released="2025-08",
    summary=(
        "A hybrid of Mamba state-space layers, a few attention layers without positions and "
        "squared-ReLU MLPs, one mixer per block in a fixed pattern."
    ),
    tags=("Mamba-2", "Hybrid", "Dense"),
    checkpoint="nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    model_class="NemotronHForCausalLM",
    config_class="NemotronHConfig",
)
