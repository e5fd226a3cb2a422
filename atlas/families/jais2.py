"""Jais 2 (model_type jais2): Inception's Arabic-English decoder, LayerNorm and an ungated squared-ReLU MLP with biases.

Every block is pre-norm with LayerNorms (gain and bias): a LayerNorm, multi-head attention with rotary
positions and biases on the query, key, value and output projections, the residual add, a second
LayerNorm and an MLP of two matrices with biases, up and down, with the squared ReLU between them and
no gate. Every head has its own keys and values. The output head is a separate matrix without a bias.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Jais 2",
    vendor="Inception (G42)",
    released="2025-12",
    summary=(
        "An Arabic-English decoder: LayerNorms, multi-head attention with biased projections and rotary "
        "positions, and an ungated squared-ReLU MLP with biases."
    ),
    tags=("LayerNorm", "Squared ReLU", "QKV bias", "Dense", "Arabic"),
    checkpoint="inceptionai/Jais-2-8B-Chat",
    model_class="Jais2ForCausalLM",
    config_class="Jais2Config",
)
