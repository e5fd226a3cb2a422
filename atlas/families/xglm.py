"""XGLM (model_type xglm): Meta's multilingual fairseq decoder with fixed sinusoidal positions.

The token embeddings are multiplied by the square root of the width, and a fixed sinusoidal position
table (no weights; sines in the first half of each row, cosines in the second) is added, read two
rows late as fairseq's padding offset requires, with positions counted from the attention mask. Each
block is pre-norm with LayerNorm: a norm, multi-head attention with separate query, key and value
projections (all with biases), add; a second norm, a two-layer GELU MLP four times the width, add. A
final LayerNorm precedes an output head tied to the token embedding, over a vocabulary of about
256 thousand tokens shared by 30 languages.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="XGLM",
    vendor="Meta",
    released="2021-12",
    summary=(
        "A multilingual decoder in the manner of the large GPTs: scaled token embeddings plus fixed sinusoidal positions, "
        "LayerNorm pre-norm blocks with a GELU MLP, a tied head over a very large multilingual vocabulary."
    ),
    tags=("Sinusoidal positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="facebook/xglm-564M",
    model_class="XGLMForCausalLM",
    config_class="XGLMConfig",
)
