"""Command R7B (model_type cohere2): Cohere's parallel block with three local layers to one global.

Each block normalises its input once, with a LayerNorm that subtracts the mean but has no bias, and
gives that tensor to both the attention and the gated SiLU MLP; the two outputs and the input are
summed in one add. Attention is grouped-query. Three of every four layers attend within a sliding
window and rotate queries and keys with rotary positions whose pairs are adjacent dimensions; the
fourth attends over the whole context and applies no position at all, relying on the local layers
for order. The output head is the token embedding, and its logits are multiplied by a fixed
logit_scale before they are returned.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Command R7B",
    vendor="Cohere",
    released="2024-12",
    summary=(
        "Parallel blocks under one bias-free LayerNorm, sliding-window rotary layers interleaved with "
        "global layers that use no positions, a SwiGLU MLP and scaled logits from a tied head."
    ),
    tags=("Parallel attention and MLP", "SwiGLU", "Tied embeddings"),
    checkpoint="CohereLabs/c4ai-command-r7b-12-2024",
    model_class="Cohere2ForCausalLM",
    config_class="Cohere2Config",
)
