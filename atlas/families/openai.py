"""GPT-1 (model_type openai-gpt): OpenAI's first generative pre-trained transformer, post-norm.

Token embeddings and learned absolute position embeddings are added to start the residual stream.
Each block is post-norm: attention reads the stream, its output is added and the sum is normalised
by ln_1; the MLP reads that normed sum, its output is added and normalised by ln_2, and the result
is the block's output. There is no final norm after the last block. The projections are Conv1D
(weights stored [in, out]); query, key and value come out of one fused c_attn projection; every
projection has a bias and the MLP is four times the width with a GELU. The output head is tied to
the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GPT-1",
    vendor="OpenAI",
    released="2018-06",
    summary=(
        "The first GPT: learned position embeddings, post-norm blocks with a LayerNorm after each "
        "residual add, fused multi-head attention, a GELU MLP and a tied head."
    ),
    tags=("Learned positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="openai-community/openai-gpt",
    model_class="OpenAIGPTLMHeadModel",
    config_class="OpenAIGPTConfig",
)
