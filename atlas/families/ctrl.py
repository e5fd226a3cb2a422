"""CTRL (model_type ctrl): Salesforce's conditional transformer, steered by a control code as the first token.

The token embeddings are multiplied by the square root of the width, and a fixed sinusoidal position table
(no weights) is added. Each block is pre-norm with LayerNorm: a norm, multi-head attention with separate
query, key and value projections (all with biases), add; a second norm, a two-layer ReLU MLP whose inner
width the config calls dff, add. A final LayerNorm precedes an output head whose matrix is the token
embedding but whose bias is its own, over a vocabulary of about a quarter of a million tokens.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="CTRL",
    vendor="Salesforce",
    released="2019-09",
    summary=(
        "A deep decoder conditioned on control codes: scaled token embeddings plus fixed sinusoidal positions, "
        "LayerNorm pre-norm blocks with a ReLU MLP, a tied head that keeps a bias of its own."
    ),
    tags=("Sinusoidal positions", "LayerNorm", "ReLU MLP", "Tied embeddings"),
    checkpoint="Salesforce/ctrl",
    model_class="CTRLLMHeadModel",
    config_class="CTRLConfig",
)
