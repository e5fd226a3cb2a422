"""StarCoder2 (model_type starcoder2): a code model that mixes GPT-era parts with Mistral-era ones.

The block is sequential and pre-norm, but its norms are LayerNorms with a bias rather than RMSNorms,
and every projection carries a bias: the query, key and value projections, the attention's output
projection and both layers of the MLP. The attention is grouped-query (few key/value heads serve many
query heads), positions enter only through rotary embeddings on the full head width, and every layer
restricts attention to a sliding window of recent positions. The MLP is the older two-layer kind: an up
projection, the tanh-approximated GELU, a down projection, with no gate. The output head is tied to the
token embedding, so the vocabulary matrix is stored once.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="StarCoder2",
    vendor="BigCode",
    released="2024-02",
    summary=(
        "A code model with LayerNorm and biases everywhere, grouped-query attention over a sliding "
        "window with rotary positions, a plain GELU MLP and a tied output head."
    ),
    tags=("LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="bigcode/starcoder2-7b",
    model_class="Starcoder2ForCausalLM",
    config_class="Starcoder2Config",
)
