"""Falcon Mamba (model_type falcon_mamba): TII's attention-free Mamba stack, Mamba's blocks with three
weightless RMS norms inside each mixer.

Each block is an RMSNorm and one mixer whose output is added to the stream, as in Mamba. Inside the mixer,
after x_proj splits the time step's low rank, B and C apart, each of the three is normalized by an RMS norm
with no learned scale (eps mixer_rms_eps) before the time step is widened back and the scan runs; the
norms keep the scan's inputs at a steady magnitude in a deep stack. The head is its own matrix, not the
embedding's.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Falcon Mamba",
    vendor="Technology Innovation Institute",
    released="2024-08",
    summary=(
        "An attention-free stack of Mamba mixers whose time step, B and C pass weightless RMS norms before "
        "the scan, with its own output head."
    ),
    tags=("Mamba", "Attention-free", "Dense"),
    checkpoint="tiiuae/falcon-mamba-7b",
    model_class="FalconMambaForCausalLM",
    config_class="FalconMambaConfig",
)
