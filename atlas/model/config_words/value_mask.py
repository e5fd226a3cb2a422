"""config.json in words: the keys of an attention masked by scores of its values and of an MLP that a switch may turn
into a mixture (Doge's keep_window_size and is_moe). Where is_moe is false, the expert keys beside it build nothing,
and their words say so first.
"""

from __future__ import annotations

from atlas.model.config_words import experts as _experts  # noqa: F401  (registers the expert keys wrapped below)
from atlas.model.config_words.registry import EXPLAIN, explains
from atlas.numbers import grouped


@explains("keep_window_size")
def _keep_window(key, v, c):
    keep = c.count(key)
    words = (f"The keys each query keeps past which the attention's mask, scored from the values, masks the rest: up to "
             f"{grouped(keep)} keys a query reads them all; past that, only the {grouped(keep)} keys of highest score")
    longest = c.get_count("max_position_embeddings")
    if longest and longest <= keep:
        words += f" (max_position_embeddings is {grouped(longest)}, so within it no key is masked for its score)"
    return words


@explains("is_moe")
def _is_moe(key, v, c):
    if c.flag(key):
        return ("Each block's MLP is a cross-domain mixture: the gated MLP beside routed tiny experts, each a down and an up "
                "vector, that each token chooses by product keys")
    return "Each block runs a gated MLP; true would add routed tiny experts beside it (a cross-domain mixture)"


_SWITCHED = ("num_experts", "num_experts_per_tok", "norm_topk_prob", "router_aux_loss_coef", "output_router_logits")


def _unless_moe(explain):
    def words(key, v, c):
        said = explain(key, v, c)
        if c.raw.get("is_moe") is False:
            return f"Unused here, since is_moe is false and no block builds experts; were it true: {said[:1].lower()}{said[1:]}"
        return said
    return words


for _key in _SWITCHED:
    if _key in EXPLAIN:
        EXPLAIN[_key] = _unless_moe(EXPLAIN[_key])
