"""GPT-2 (model_type gpt2): the learned-position, LayerNorm decoder that the later families revised.

Token embeddings (wte) and learned absolute position embeddings (wpe) are added to start the residual
stream; there is no rotary embedding. Each block is pre-norm with LayerNorm (mean-centred, with a bias):
ln_1, multi-head attention, add; ln_2, a two-layer MLP with the tanh-approximated GELU, add. The
projections are transformers' Conv1D, a linear layer whose weight is stored as [in, out], the transpose
of nn.Linear; attention's query, key and value come out of one fused c_attn projection and are split
afterwards. Every projection has a bias. The output head is tied to wte.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GPT-2",
    vendor="OpenAI",
    released="2019-02",
    summary=(
        "Learned position embeddings, LayerNorm, multi-head attention from one fused projection and a "
        "GELU MLP, with the output head tied to the token embedding."
    ),
    tags=("Learned positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="openai-community/gpt2",
    sizes=("openai-community/gpt2-medium", "openai-community/gpt2-large", "openai-community/gpt2-xl"),
    model_class="GPT2LMHeadModel",
    config_class="GPT2Config",
)
