"""MiniMax-Text-01 (model_type minimax): lightning attention in seven blocks of every eight and softmax
attention in the eighth, every block closing with a mixture of experts, under scaled residuals.

Lightning attention is linear attention with a decay: the SiLU of one projection gives each head its
queries, keys and values; a query at position t reads every earlier value weighted by its key's dot
product with the query and by exp(-λ·(t-s)), a decay of the head's own that grows with the distance
and shrinks with depth, and no softmax. So a head's whole past is one head_dim × head_dim state that
decays by exp(-λ) at each step, and the layer's memory does not grow with the context. The heads'
outputs are RMS-normalised across the full width, gated by the sigmoid of a projection of the block's
input, and projected back. Every eighth block (config.layer_types) runs grouped-query softmax attention
with rotary positions on half of each head instead. Each block normalises its input and keeps the
normalised stream as the residual; each sublayer's residual is multiplied by an alpha factor from the
config (DeepNorm's) before the sublayer's output is added, and the feed-forward half is a mixture of
experts with a softmax router choosing two of many SwiGLU experts per token. The head is not tied.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY_SLIDING_WINDOW

FAMILY = Family(
    title="MiniMax-Text-01",
    vendor="MiniMax",
    released="2025-01",
    summary=(
        "Lightning attention (linear attention with a per-head decay) in most blocks, softmax attention "
        "in every eighth, each block closing with a mixture of experts under scaled residuals."
    ),
    tags=("Lightning attention", "Hybrid"),
    checkpoint="MiniMaxAI/MiniMax-Text-01-hf",
    model_class="MiniMaxForCausalLM",
    config_class="MiniMaxConfig",
    # lightning blocks shorter than the prompt, so the run goes through the state carried between blocks
    preview=lambda config: {"block_size": TINY_SLIDING_WINDOW},
    not_applicable={
        "block_sum": "the residual is the normalised input times an alpha factor, not the block's input",
        "attention_add": "the attention's residual is the normalised input times an alpha factor, not the block's input",
    },
)
