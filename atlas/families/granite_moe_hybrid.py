"""Granite 4.0-H (model_type granitemoehybrid): Mamba-2 layers and a few attention layers, each followed by a
mixture of small experts with a shared expert.

Every block has the same two halves. The first normalises the stream and runs a sequence mixer: in
most blocks a Mamba-2 layer, in every tenth or so (config.layer_types) grouped-query attention that sees
no positions at all. The second normalises again and runs a mixture of experts: a router picks a few of
many narrow SwiGLU experts for each token and weighs them by a softmax over the chosen logits, and a
wider shared SwiGLU expert runs on every token beside them. So unlike Nemotron-H, where a block is one
mixer, here each block pairs a sequence mixer with a feed-forward part, as a transformer does.

The Mamba-2 layer projects the stream into a gate, the scan input, one B and C shared by all heads and
a time step per head; a short causal convolution and a SiLU prepare x, B and C, each head carries a
head_dim × state_size state that decays by exp(Δ·A) and takes in Δ·x·Bᵀ, C reads it out, a skip D·x is
added, and the gated RMSNorm and the output projection bring the heads back to the width. Granite's
multipliers scale the stream at four places: the embeddings are multiplied by embedding_multiplier,
every sublayer's output by residual_multiplier before its add, the attention scores by
attention_multiplier instead of one over the square root of the head size, and the logits are divided
by logits_scaling. The head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Granite 4.0-H",
    vendor="IBM",
    released="2025-10",
    summary=(
        "Mostly Mamba blocks with a few position-free attention blocks, every block closing with a mixture "
        "of small experts beside a shared expert, and Granite's four multipliers."
    ),
    tags=("Mamba-2", "Hybrid", "Shared expert"),
    checkpoint="ibm-granite/granite-4.0-h-tiny",
    model_class="GraniteMoeHybridForCausalLM",
    config_class="GraniteMoeHybridConfig",
    not_applicable={
        "block_sum": "each sublayer's output is multiplied by residual_multiplier before it is added to the stream",
        "attention_add": "the attention's output is multiplied by residual_multiplier before it is added to the stream",
        "ssm_mlp_block_sum": "each sublayer's output is multiplied by residual_multiplier before it is added to the stream",
        "mixture_sum": "the shared expert is the block's own child beside the mixture: the block adds the two, so mlp_output is the mixture's output alone",
        "embeddings": "the token embeddings are multiplied by embedding_multiplier before block 0 reads them",
        "logits": "the head's output is divided by logits_scaling before the model returns it",
    },
)
