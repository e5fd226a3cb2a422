"""Command R (model_type cohere): Cohere's parallel block, one bias-free LayerNorm feeding attention and MLP.

Token embeddings start the residual stream. Each block normalises its input once, with a LayerNorm
that subtracts the mean but has no bias, and gives that tensor to both the attention and the gated
SiLU MLP; the block adds both outputs to its input in one add. Attention is multi-head in this
checkpoint, with rotary positions whose pairs are adjacent dimensions, at a very large base
(rope_theta 8,000,000). A final norm of the same kind precedes the output head, which is the token
embedding; its logits are multiplied by a fixed logit_scale before they are returned.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Command R",
    vendor="Cohere",
    released="2024-03",
    summary=(
        "Parallel blocks under one bias-free LayerNorm, multi-head attention with interleaved rotary "
        "positions, a SwiGLU MLP and scaled logits from a tied head over a very large vocabulary."
    ),
    tags=("Parallel attention and MLP", "SwiGLU", "Tied embeddings"),
    checkpoint="CohereForAI/c4ai-command-r-v01",
    model_class="CohereForCausalLM",
    config_class="CohereConfig",
)
