"""GPT-1 (model_type openai-gpt): OpenAI's first generative pre-trained transformer, the post-norm original.

Token embeddings and learned absolute position embeddings are added to start the residual stream.
Each block normalises after the add, as the 2017 transformer did: multi-head attention from one fused
projection, add, LayerNorm; a two-layer MLP with the tanh-approximated GELU four times the width, add,
LayerNorm. So the stream itself is normalised after every sublayer and there is no final norm. The
projections are transformers' Conv1D (weights stored as [in, out]) with biases, and the output head is
tied to the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GPT-1",
    vendor="OpenAI",
    released="2018-06",
    summary=(
        "The first GPT: learned positions, post-norm LayerNorm blocks (each sublayer is added, then the "
        "stream normalised), one fused attention projection, a GELU MLP and a tied head."
    ),
    tags=("Learned positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="openai-community/openai-gpt",
    model_class="OpenAIGPTLMHeadModel",
    config_class="OpenAIGPTConfig",
)
