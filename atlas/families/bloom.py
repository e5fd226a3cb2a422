"""BLOOM (model_type bloom): BigScience's multilingual decoder, with ALiBi in place of position embeddings.

No position is added to the tokens: the token embedding is normalised by a LayerNorm of its own
(word_embeddings_layernorm) and goes straight into the blocks. Order enters only in the attention,
where every head adds to its scores a bias that grows linearly with the key's position, at a slope
of its own; the slopes fall geometrically from head to head, so some heads look far back and others
mostly at the last few tokens. Because the softmax of a row is unchanged by a constant added to the
row, a bias of slope times the key's position ranks keys exactly as a penalty of slope times the
distance back from the query does. The model builds this bias once and hands it to every block.

Each block is pre-norm with LayerNorm: input_layernorm, multi-head attention, add; then
post_attention_layernorm, a two-layer MLP four times the width with the tanh-approximated GELU,
add. The attention and the MLP each add the residual themselves, handed to them by the block (with
apply_residual_connection_post_layernorm false, the residual is the block's input, not its normed
copy). Query, key and value come out of one fused projection whose outputs are grouped by head: each
head's query, key and value lie side by side. Every linear layer has a bias, and the output head is
the token embedding's matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="BLOOM",
    vendor="BigScience",
    released="2022-07",
    summary=(
        "ALiBi instead of position embeddings, a LayerNorm on the token embeddings, LayerNorm pre-norm "
        "blocks with biased fused attention and a GELU MLP, a tied head over a very large multilingual vocabulary."
    ),
    tags=("LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="bigscience/bloom-560m",
    sizes=("bigscience/bloom-1b1", "bigscience/bloom-1b7", "bigscience/bloom-3b", "bigscience/bloom-7b1", "bigscience/bloom"),
    model_class="BloomForCausalLM",
    config_class="BloomConfig",
)
