"""Doge (model_type doge): SmallDoge's small decoder, whose attention masks each key by a score computed from its
value, and whose blocks weigh the stream per channel before adding each sublayer back.

Each block runs two sublayers, each after an RMSNorm. The attention projects queries, keys and values, normalises
each head's queries and keys by an RMSNorm of the head width, and turns them with rotary positions (grouped-query:
fewer key-value heads than query heads). Its dynamic mask reads the values: a projection dt_proj maps a position's
values of all key-value heads to one number per key-value head, and exp(A * softplus(dt)) with a learned A per head
gives that key a score, the same for every query; the score is added to the attention scores beside the causal
mask. Past keep_window_size keys, only the keep_window_size keys of highest score stay unmasked for each query.
Where a block would add a sublayer's output to the stream, Doge adds it to the stream times a learned weight per
channel (input_residual after the attention, post_attention_residual after the MLP). The MLP is a gated SiLU
MLP; a configuration with is_moe set replaces it by a cross-domain mixture of tiny experts (CDMoE) beside the
same MLP. A final RMSNorm precedes a head tied to the embeddings.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Doge",
    vendor="SmallDoge",
    released="2024-12",
    summary=(
        "A small decoder whose attention adds a per-head mask scored from the values, and whose blocks weigh the "
        "stream per channel before adding each sublayer back."
    ),
    tags=("Dense", "RMSNorm"),
    checkpoint="SmallDoge/Doge-160M",
    sizes=("SmallDoge/Doge-20M", "SmallDoge/Doge-60M", "SmallDoge/Doge-320M"),
    model_class="DogeForCausalLM",
    config_class="DogeConfig",
)
