"""BioGPT (model_type biogpt): Microsoft's biomedical GPT, a fairseq decoder with scaled embeddings.

The token embeddings are multiplied by the square root of the width before the learned position
embeddings are added; the position table is read two rows late (fairseq's padding offset), with
positions counted from the attention mask. Each block is pre-norm with LayerNorm: a norm, multi-head
attention with separate query, key and value projections (all with biases), add; a second norm, a
two-layer GELU MLP four times the width, add. A final LayerNorm precedes the output projection,
which is tied to the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="BioGPT",
    vendor="Microsoft",
    released="2022-10",
    summary=(
        "A medium-sized GPT decoder trained on PubMed: token embeddings scaled by the square root of the width, "
        "learned positions read two rows late, LayerNorm pre-norm blocks with a GELU MLP, a tied head."
    ),
    tags=("Learned positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="microsoft/biogpt",
    model_class="BioGptForCausalLM",
    config_class="BioGptConfig",
)
