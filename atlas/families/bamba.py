"""Bamba (model_type bamba): IBM's hybrid of Mamba-2 layers and three grouped-query attention layers,
every block closing with a SwiGLU feed-forward.

Every block has the same two halves, as a transformer's: the first normalises the stream and runs a
sequence mixer, the second normalises again and runs a SwiGLU feed-forward of width
intermediate_size. The mixer is a Mamba-2 layer in every block but those config.attn_layer_indices
names, which run grouped-query attention with rotary positions on half of each head's width. The
Mamba-2 layer projects the stream into a gate, the scan input, one B and C shared by all heads of a
group and a time step per head; a short causal convolution and a SiLU prepare x, B and C, each head
carries a head_dim × state_size state that decays by exp(Δ·A) and takes in Δ·x·Bᵀ, C reads it out, a
skip D·x is added, and a gated RMSNorm and the output projection bring the heads back to the width.
The head is not tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Bamba",
    vendor="IBM",
    released="2024-12",
    summary=(
        "Mamba mixers in most blocks, grouped-query attention in a few chosen by index, every block "
        "closing with a SwiGLU feed-forward."
    ),
    tags=("Mamba-2", "Hybrid", "SwiGLU", "Dense"),
    checkpoint="ibm-ai-platform/Bamba-9B",
    model_class="BambaForCausalLM",
    config_class="BambaConfig",
)
