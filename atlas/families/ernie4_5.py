"""ERNIE 4.5 dense (model_type ernie4_5): Baidu's smallest ERNIE 4.5, a Llama block with pairwise rotary and a tied head.

The dense member of the ERNIE 4.5 release, the same attention as its mixture-of-experts siblings over
one SwiGLU MLP. Each block is pre-norm: an RMSNorm, grouped-query attention without biases, the
residual add, a second RMSNorm and the MLP. The rotary embedding turns adjacent pairs of dimensions
(0 with 1, 2 with 3, ...) and leaves them in place, rather than pairing the first half of a head with
the second. Heads are wider than hidden_size / num_attention_heads, so the query projection is wider
than the residual stream. The output head reuses the embedding matrix, which at this size is a large
share of the whole model.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="ERNIE 4.5 dense",
    vendor="Baidu",
    released="2025-06",
    summary=(
        "A small grouped-query decoder with pairwise rotary, heads wider than the stream's share, a SwiGLU "
        "MLP and a tied head that holds much of the model."
    ),
    tags=("SwiGLU", "Dense"),
    checkpoint="baidu/ERNIE-4.5-0.3B-PT",
    model_class="Ernie4_5ForCausalLM",
    config_class="Ernie4_5Config",
    config_overrides={"architectures": ["Ernie4_5ForCausalLM"]},
    override_reasons={"architectures": (
        "this copy of the file names Ernie4_5_ForCausalLM, the class of Baidu's remote code; transformers' own "
        "class, which the Hub file names in its later revision, is Ernie4_5ForCausalLM")},
)
