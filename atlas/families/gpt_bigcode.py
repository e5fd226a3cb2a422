"""StarCoder 1 / SantaCoder (model_type gpt_bigcode): GPT-2's decoder with multi-query attention, for code.

The layout is GPT-2's: token embeddings plus learned absolute position embeddings start the residual
stream, and each block is pre-norm with LayerNorm (ln_1, attention, add; ln_2, a two-layer MLP with
the tanh-approximated GELU, add), with a final LayerNorm and an output head tied to the token
embedding. What changes is the attention: every query head reads one shared key head and one shared
value head (multi-query attention), so the fused c_attn projection is as wide as the stream plus two
head widths, not three times the stream, and the cache holds one key and one value per token per
layer. The projections are nn.Linear with biases.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="StarCoder 1 (SantaCoder)",
    vendor="BigCode",
    released="2023-01",
    summary=(
        "The learned positions, LayerNorm and GELU MLP of the early GPTs with multi-query attention: one key and one "
        "value head shared by every query head, from one fused projection; a tied head."
    ),
    tags=("Learned positions", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="bigcode/gpt_bigcode-santacoder",
    model_class="GPTBigCodeForCausalLM",
    config_class="GPTBigCodeConfig",
)
