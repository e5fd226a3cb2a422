"""Jamba (model_type jamba): Mamba layers with an attention layer every eighth block, and a mixture of
experts in every other block.

Every block has the transformer's two halves: a norm and a sequence mixer, then a norm and a
feed-forward part. The sequence mixer is a Mamba (selective state-space) layer in seven blocks of
eight and grouped-query attention in the eighth (attn_layer_period and attn_layer_offset place it); the
attention has no positional encoding, since the Mamba layers already see the order. The feed-forward
part is a SwiGLU MLP in half the blocks and, in the other half (expert_layer_period and
expert_layer_offset), a mixture of SwiGLU experts of which the router picks a few per token.

This is the first Mamba design, not Mamba-2: the input projection gives x and a gate z; x passes a
short causal convolution and a SiLU; a second projection of x gives a low-rank time step and the B and C
of every position (each normalised by its own RMSNorm in Jamba); the time step is projected up to one
value per channel and passed through a softplus. Every channel then carries a state of state_size
numbers with its own decay A per state entry: the state decays by exp(Δ·A), takes in Δ·x·B, and C
reads it out; a skip D·x is added and the result is gated by SiLU(z) before the output projection.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Jamba 1.5 Mini",
    vendor="AI21 Labs",
    released="2024-08",
    summary=(
        "Mamba layers with one position-free attention layer in every eight blocks, and a mixture of "
        "experts in every other block's feed-forward part."
    ),
    tags=("Mamba", "Hybrid"),
    checkpoint="ai21labs/AI21-Jamba-Mini-1.5",
    model_class="JambaForCausalLM",
    config_class="JambaConfig",
)
