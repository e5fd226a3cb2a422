"""Persimmon (model_type persimmon): Adept's 8B decoder with squared-ReLU MLPs and LayerNorm on queries and keys.

Token embeddings start the residual stream; there is no position table. Each block is pre-norm with
LayerNorm (with biases): input_layernorm, multi-head attention, add; post_attention_layernorm, a
two-layer MLP whose activation is the squared ReLU, add. Query, key and value come out of one fused
projection with a bias, laid out head by head; queries and keys are each normalised per head by a
LayerNorm of their own before rotary positions turn half of each head's dimensions. The output
projection and both MLP layers have biases. A final LayerNorm precedes an untied head over a
vocabulary of 262,144 tokens.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Persimmon",
    vendor="Adept",
    released="2023-09",
    summary=(
        "LayerNorm pre-norm blocks with a squared-ReLU MLP, fused per-head query-key-value projections, "
        "LayerNorm on queries and keys, rotary positions on half of each head, an untied head."
    ),
    tags=("LayerNorm", "QK norm", "Partial rotary", "Squared ReLU"),
    checkpoint="adept/persimmon-8b-base",
    model_class="PersimmonForCausalLM",
    config_class="PersimmonConfig",
)
