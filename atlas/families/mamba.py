"""Mamba (model_type mamba): the selective state-space model of Gu and Dao, a stack of Mamba mixers with
no attention and no feed-forward.

Each block normalises the stream with an RMSNorm and runs one Mamba mixer, whose output is added back to
the stream. The mixer projects the stream into a scan input and a gate, each expand times the width; a
short causal depthwise convolution and a SiLU prepare the scan input, from which one projection reads a
low-rank time step and the input-dependent B and C. The time step is widened back to one value per
channel and passed through a softplus; every channel carries a state of state_size values that decays
by exp(Δ·A) and takes in Δ·B·x, C reads it out, a skip D·x is added, the SiLU of the gate multiplies the
result and the output projection brings it back to the width. The head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mamba",
    vendor="Carnegie Mellon and Princeton (state-spaces)",
    released="2023-12",
    summary=(
        "A stack of selective state-space mixers with no attention and no feed-forward: each block keeps a "
        "fixed state per channel in place of a growing cache."
    ),
    tags=("Mamba", "Attention-free", "Dense"),
    checkpoint="state-spaces/mamba-130m-hf",
    sizes=("state-spaces/mamba-370m-hf", "state-spaces/mamba-790m-hf", "state-spaces/mamba-1.4b-hf", "state-spaces/mamba-2.8b-hf"),
    model_class="MambaForCausalLM",
    config_class="MambaConfig",
)
