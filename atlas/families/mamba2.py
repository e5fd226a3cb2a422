"""Mamba-2 (model_type mamba2): the state-space duality mixer of Dao and Gu stacked on its own, with no
attention and no feed-forward, drawn from Mistral's Codestral Mamba.

Each block normalises the stream with an RMSNorm and runs one Mamba-2 mixer, whose output is added back.
The mixer's single input projection gives the gate, the scan input, B and C for n_groups groups, and one
time step per head; a short causal depthwise convolution and a SiLU run over the scan input, B and C
together. Every head keeps a state of head_dim × state_size values that decays by one scalar exp(Δ·A) per
head and token, takes in Δ·B·x and is read out by C, with a skip D·x; a gated RMS norm over groups mixes in
the SiLU of the gate before the output projection. The head is its own matrix, not the embedding's.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mamba-2",
    vendor="Mistral AI (architecture: Dao and Gu)",
    released="2024-07",
    summary=(
        "A stack of state-space mixers in their dual form, with no attention and no feed-forward: each head "
        "keeps a fixed state that one scalar decay per token carries forward, read out through grouped B and C."
    ),
    tags=("Mamba-2", "Attention-free", "Dense"),
    checkpoint="mistralai/Mamba-Codestral-7B-v0.1",
    model_class="Mamba2ForCausalLM",
    config_class="Mamba2Config",
)
