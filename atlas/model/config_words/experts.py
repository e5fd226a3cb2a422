"""config.json in words: mixtures of experts. How many experts and how wide, how the router scores,
picks and weighs them (groups, shared experts, hash routing), which blocks are mixtures, and the
settings that serve only training (the balancing loss, capacities, dropped tokens).
"""

from __future__ import annotations

from atlas.model.config_words.registry import (
    EXPERT_COUNT_KEYS,
    EXPLAIN,
    V4,
    _alias,
    _built_as,
    _entries,
    _num,
    _ordinal,
    _plural,
    _switch,
    _value_words,
    activation_words,
    explains,
)
from atlas.numbers import grouped


# --- how many experts, and how wide ---------------------------------------------------------------

@explains(*EXPERT_COUNT_KEYS)
def _expert_count(key, v, c):
    return f"{_plural(c.count(key), 'routed expert')} per mixture block"


@explains("moe_intermediate_size")
def _moe_intermediate(key, v, c):
    shared = c.get_count("n_shared_experts")
    who = "each routed and shared expert" if shared else "each routed expert"
    if isinstance(v, list):  # one width per layer (Hunyuan's training config)
        widths = [c.count(key, w) for w in v]
        if len(set(widths)) == 1:
            return f"The hidden width of the experts, given once per layer: {grouped(widths[0])} at each of the {len(widths)} layers"
        return f"The hidden width of the experts, given once per layer: from {grouped(min(widths))} to {grouped(max(widths))}"
    return f"The hidden width of {who}: {grouped(c.count('moe_intermediate_size'))}"


_alias("expert_ffn_hidden_size", "moe_intermediate_size")


@explains("shared_intermediate_size")
def _shared_width(key, v, c):
    width = c.count(key)
    return f"The hidden width of the shared expert: {grouped(width)}" if width else "Zero: there is no shared expert"


@explains("shared_expert_intermediate_size")
def _shared_expert_width(key, v, c):
    return f"The hidden width of the shared expert, which every token passes through: {grouped(c.count(key))}"


@explains("zero_expert_num")
def _zero_expert_num(key, v, c):
    n = c.count(key)
    real = c.get_count("n_routed_experts")
    words = f"{_plural(n, 'zero-computation expert')} join the router's choices, which hold no weights and run no MLP"
    if real:
        words += f": the router picks among {grouped(real + n)}, of which {grouped(real)} are real experts"
    return words


@explains("zero_expert_type")
def _zero_expert_type(key, v, c):
    if not isinstance(v, str):
        c.fail(key, "must be a name")
    words = f"What a zero-computation expert does with its token: {v!r}"
    if _built_as(c, "LongcatFlashForCausalLM"):
        words += ("; transformers reads no such setting: its zero experts always hand back the token's input, "
                  "times the slot's weight (the preview run measures which rule holds)")
    return words


# --- the router: how it scores, how many experts it picks, how it weighs them ---------------------

@explains("scoring_func")
def _scoring(key, v, c):
    func = c.text("scoring_func")
    if func == "sigmoid":
        return "The router scores each expert with a sigmoid of its logit, each score on its own (they need not sum to one)"
    if func == "softmax":
        return "The router turns its logits into scores with a softmax over all routed experts, so the scores sum to one"
    return f'The router\'s scoring function is "{func}", which the atlas has no words for'


_alias("moe_router_activation_func", "scoring_func")


@explains("num_experts_per_tok", "experts_per_token")
def _top_k(key, v, c):
    k = c.count(key)
    experts = c.experts()
    words = f"Each token is sent to {k} of the {experts[1]} routed experts" if experts else f"Each token is sent to {_plural(k, 'expert')}"
    if key == "experts_per_token" and "num_experts_per_tok" in c.raw:
        other = c.count("num_experts_per_tok", c.raw["num_experts_per_tok"])
        words += "; the same count as num_experts_per_tok" if other == k else f"; num_experts_per_tok says {other}"
    return words


_alias("num_experts_per_token", "num_experts_per_tok")
_alias("moe_k", "num_experts_per_tok")


@explains("moe_topk")
def _moe_topk(key, v, c):
    if isinstance(v, list):
        ks = [c.count(key, k) for k in v]
        return (f"Experts chosen per token, given once per layer: {grouped(ks[0])} at each of the {len(ks)} layers" if len(set(ks)) == 1
                else f"Experts chosen per token, given once per layer: from {grouped(min(ks))} to {grouped(max(ks))}")
    return f"{_plural(c.count(key), 'routed expert')} chosen for each token"


@explains("norm_topk_prob")
def _norm_topk(key, v, c):
    if c.flag("norm_topk_prob"):
        words = "The chosen experts' weights are renormalized to sum to one"
        factor = c.raw.get("routed_scaling_factor")
        if factor is not None:
            words += f", then multiplied by routed_scaling_factor ({_num(c.number('routed_scaling_factor', factor))})"
        return words
    return "The chosen experts' weights are not renormalized: each keeps the score the router gave it, whatever their sum"


_alias("moe_renormalize", "norm_topk_prob")


@explains("routed_scaling_factor")
def _scaling(key, v, c):
    factor = _num(c.number("routed_scaling_factor"))
    if c.raw.get("norm_topk_prob") is True:
        return f"The chosen experts' weights are multiplied by {factor} after renormalizing, so they sum to {factor}"
    return f"The chosen experts' weights are multiplied by {factor}"


_switch("use_routing_bias", "The mixture holds a learned per-expert bias that steers which experts are chosen and does not weigh them",
        "No per-expert selection bias")

_switch("moe_use_aux_free",
        "A per-expert bias added to the scores balances the experts without an auxiliary loss: it shifts which experts "
        "are chosen, not their weights",
        "No per-expert selection bias: the experts are chosen by their scores alone")


def _input_jitter(p: int | float) -> str:
    if p == 0:
        return "No noise on the mixture block's input (0); no effect at inference anyway"
    return (f"In training, the mixture block's input is multiplied by noise drawn evenly from "
            f"[{_num(1 - p)}, {_num(1 + p)}]; no effect at inference")


@explains("input_jitter_noise")
def _input_jitter_noise(key, v, c):
    return _input_jitter(c.number("input_jitter_noise"))


@explains("router_jitter_noise")
def _router_jitter(key, v, c):
    p = c.number("router_jitter_noise")
    if "input_jitter_noise" not in c.raw:
        # The only jitter of the config: the block's input noise.
        return _input_jitter(p)
    # The input noise has a key of its own, so this one is the router's threshold.
    return (f"The router's threshold: every expert whose score trails the best one by more than {_num(2 * p)} "
            f"(twice {_num(p)}) of the larger magnitude is masked out before an expert is chosen and weighted; "
            "it applies at inference too")


@explains("num_hash_layers")
def _hash_layers(key, v, c):
    n = c.count("num_hash_layers")
    if n == 0:
        return "No block routes by token id: every mixture chooses its experts by score"
    blocks = "Block 0 chooses" if n == 1 else f"Blocks 0–{n - 1} choose"
    return (f"{blocks} each token's experts from a fixed table indexed by the token's id, not by score; the router's "
            "scores only weigh the experts the table gives")


@explains("moe_gate")
def _moe_gate(key, v, c):
    gate = c.text("moe_gate")
    words = {"topk": "each token goes to its top-scoring experts"}.get(gate, "a gate the atlas has no words for")
    return f'The original code\'s name for its gate, "{gate}": {words}'


# --- expert groups and the selection rule ---------------------------------------------------------

@explains("n_group")
def _n_group(key, v, c):
    groups = c.count("n_group")
    experts = c.experts()
    if groups <= 1:
        return "The routed experts form a single group, so the group limit removes no candidate"
    if experts and experts[1] % groups == 0:
        return f"The {experts[1]} routed experts are split into {groups} groups of {experts[1] // groups} for selection"
    return f"The routed experts are split into {groups} groups for selection"


_alias("num_expert_group", "n_group")


@explains("topk_group")
def _topk_group(key, v, c):
    k = c.count("topk_group")
    groups = c.get_count("n_group")
    if groups is not None and groups <= 1:
        return f"Candidates come from the best {k} group{'s' if k != 1 else ''}; with a single group every expert stays a candidate"
    of = f" of the {groups}" if groups else ""
    return f"Each token keeps candidates only from the best {k}{of} expert groups"


@explains("use_grouped_topk")
def _grouped_topk(key, v, c):
    if not c.flag("use_grouped_topk"):
        return "The experts are chosen by a plain top-k of the scores, with no groups"
    groups = c.get_count("n_group")
    words = "The experts are chosen within the best groups, as n_group and topk_group set them"
    if groups is not None and groups <= 1:
        words += "; with a single group, every expert stays a candidate"
    return words


_switch("group_limited_greedy", "The router first limits each token to the best expert groups", "The router does not limit tokens to expert groups")


@explains("topk_method")
def _topk_method(key, v, c):
    method = c.text("topk_method")
    words = {
        "noaux_tc": "scores plus a learned per-expert selection bias choose the experts, within the best groups; the weights are the unbiased scores",
        "greedy": "a plain top-k of the scores",
        "group_limited_greedy": "a top-k of the scores within the best groups",
    }.get(method, "a rule the atlas has no words for")
    return f'The original code\'s name for its expert-selection rule, "{method}": {words}'


# --- shared experts -------------------------------------------------------------------------------

@explains("n_shared_experts")
def _shared(key, v, c):
    n = c.count("n_shared_experts")
    if n == 0:
        return "No shared expert: every token passes through routed experts only"
    if n == 1:
        return "One shared expert per mixture block, which every token passes through"
    return f"{n} shared experts per mixture block, which every token passes through (built as one MLP {n} times the expert width)"


_alias("num_shared_experts", "n_shared_experts")
_alias("moe_num_shared_experts", "n_shared_experts")


@explains("num_shared_expert")
def _num_shared_expert(key, v, c):
    counts = v if isinstance(v, list) else [v]
    ns = [c.count(key, n) for n in counts]
    per = f", given once per layer for {len(ns)} layers" if isinstance(v, list) else ""
    return (f"{_plural(ns[0], 'shared expert')} in every mixture block{per}" if len(set(ns)) == 1
            else f"Shared experts per mixture block, from {grouped(min(ns))} to {grouped(max(ns))}{per}")


_switch("use_mixed_mlp_moe", "Every mixture block also runs a shared MLP on every token", "No shared MLP beside the experts")


# --- which blocks are mixtures --------------------------------------------------------------------

@explains("first_k_dense_replace")
def _first_dense(key, v, c):
    k = c.count("first_k_dense_replace")
    if k == 0:
        return "No block keeps a dense MLP: the mixture of experts starts at block 0"
    blocks = "Block 0 keeps" if k == 1 else f"Blocks 0–{k - 1} keep"
    return f"{blocks} a dense MLP; the mixture of experts starts at block {k}"


@explains("moe_layer_freq")
def _moe_freq(key, v, c):
    f = c.count("moe_layer_freq")
    if f == 1:
        return "In the original code, every block after the dense first ones is a mixture (a spacing of 1)"
    return f"In the original code, every {_ordinal(f)} block after the dense first ones is a mixture"


@explains("decoder_sparse_step")
def _sparse_step(key, v, c):
    step = c.count("decoder_sparse_step")
    if step == 1:
        return "Every block not listed in mlp_only_layers is a mixture of experts (a step of 1)"
    return f"Every {_ordinal(step)} block not listed in mlp_only_layers is a mixture of experts; the others keep a dense MLP"


@explains("mlp_only_layers")
def _mlp_only(key, v, c):
    if not isinstance(v, list):
        c.fail("mlp_only_layers", "must be a list of block indices")
    if not v:
        return "No block is forced to keep a dense MLP (the list is empty)"
    return f"Blocks {', '.join(str(c.count('mlp_only_layers', i)) for i in v)} keep a dense MLP instead of a mixture"


@explains("moe_layer_start_index")
def _moe_start(key, v, c):
    s = c.count("moe_layer_start_index")
    if s == 0:
        return "The mixtures of experts may start at block 0"
    dense = "Block 0 keeps" if s == 1 else f"Blocks 0–{s - 1} keep"
    return f"{dense} a dense MLP; the mixtures of experts may start at block {s}"


@explains("moe_layer_end_index")
def _moe_end(key, v, c):
    e = c.raw["moe_layer_end_index"]
    if e != -1:
        e = c.count("moe_layer_end_index")
    layers = c.get_count("num_hidden_layers")
    if e == -1:
        return "Set to −1: the mixtures of experts may run to the last block"
    if layers is not None and e >= layers - 1:
        return f"The mixtures of experts may run to block {e}, the last of the {layers}"
    return f"The mixtures of experts end at block {e}; the blocks after it keep a dense MLP"


@explains("moe_layer_interval")
def _moe_interval(key, v, c):
    n = c.count("moe_layer_interval")
    if n == 1:
        return "Every block from moe_layer_start_index to moe_layer_end_index is a mixture of experts (an interval of 1)"
    return (f"Between moe_layer_start_index and moe_layer_end_index, a block is a mixture of experts where its number "
            f"counted from 1 is a multiple of {n}; the others keep a dense MLP")


@explains("moe_layer_num_skipped")
def _moe_skipped(key, v, c):
    return f"A count of mixture layers the training code skips, {grouped(c.count(key))}"


@explains("interleave_moe_layer_step")
def _interleave_moe(key, v, c):
    n = c.count("interleave_moe_layer_step")
    words = "Every block is a mixture of experts" if n == 1 else f"Every {_ordinal(n)} block is a mixture of experts, the others dense"
    if c.raw.get("moe_layers") is not None:
        words += "; moe_layers is given here, and it decides"
    return words


@explains("moe_layers")
def _moe_layers(key, v, c):
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        c.fail("moe_layers", "must be a list of block numbers")
    layers = c.get_count("num_hidden_layers")
    if layers is not None and sorted(v) == list(range(layers)):
        return f"The blocks that are mixtures of experts: all {_plural(layers, 'block')}"
    return f"The blocks that are mixtures of experts (counting from 0): {', '.join(map(str, v))}; the others have a dense MLP"


# --- training only: the balancing loss, capacities, dropped tokens --------------------------------

@explains("aux_loss_alpha", "router_aux_loss_coef")
def _aux(key, v, c):
    return f"Weight {_num(c.number(key))} of the experts' balancing loss in training; no effect on a forward pass"


_switch("output_router_logits", "The router logits are returned with the output (for training's balancing loss)",
        "The router logits are not returned with the output (they serve only training's balancing loss)")
_switch("seq_aux", "Training's balancing loss was computed per sequence; no effect on a forward pass",
        "Training's balancing loss was computed over the batch; no effect on a forward pass")


@explains("moe_capacity")
def _moe_capacity(key, v, c):
    if not isinstance(v, list):
        c.fail("moe_capacity", "must be a list of capacities")
    return (f"The original code's expert-capacity settings, {_value_words(v)}, which cap how many tokens an expert "
            "takes in that code; they change no shape")


_switch("moe_drop_tokens", "Experts over their capacity drop tokens in training", "No token is dropped for capacity")
_switch("moe_random_routing_dropped_token", "Dropped tokens are routed at random in training", "Dropped tokens are not routed at random")


# --- the mixture's own section of a config (DBRX) -------------------------------------------------

@explains("ffn_config")
def _ffn_config(key, v, c):
    v = _entries(c, key, v)
    experts = v.get("moe_num_experts")
    parts = []
    for name, value in v.items():
        where = f"{key}.{name}"
        if name == "ffn_hidden_size":
            parts.append(f"ffn_hidden_size {grouped(c.count(where, value))} (the hidden width of each expert)")
        elif name == "moe_num_experts":
            parts.append(f"moe_num_experts {grouped(c.count(where, value))} (routed experts per mixture block)")
        elif name == "moe_top_k":
            k = c.count(where, value)
            of = f" of the {grouped(c.count(f'{key}.moe_num_experts', experts))}" if experts is not None else ""
            parts.append(f"moe_top_k {grouped(k)} (each token goes to {grouped(k)}{of} experts, picked by the "
                         "top softmax scores of the router)")
        elif name == "moe_jitter_eps":
            if value is None:
                parts.append("moe_jitter_eps unset (the router's input gets no noise)")
            else:
                eps = c.number(where, value)
                parts.append(f"moe_jitter_eps {_num(eps)} (in training only, the router's input is multiplied by "
                             f"noise drawn uniformly from [{_num(1 - eps)}, {_num(1 + eps)}]; none at inference)")
        elif name == "moe_loss_weight":
            parts.append(f"moe_loss_weight {_num(c.number(where, value))} (the weight of training's balancing loss, "
                         "added only when router logits are returned with labels; no effect on a forward pass)")
        elif name == "moe_normalize_expert_weights":
            if value is None:
                parts.append("moe_normalize_expert_weights unset (the chosen experts keep their softmax scores)")
            else:
                parts.append(f"moe_normalize_expert_weights {_num(c.number(where, value))} (the chosen experts' "
                             "weights are divided by their p-norm with this p)")
        elif name == "ffn_act_fn":
            act = value.get("name") if isinstance(value, dict) else None
            if not isinstance(act, str):
                c.fail(where, "must be an object naming its activation")
            parts.append(f"ffn_act_fn {_value_words(value)} (the experts' activation: {activation_words(act)})")
        elif name == "model_type":
            parts.append(f"model_type {_value_words(value)} (a label the sub-config was saved with; nothing reads it)")
        else:
            parts.append(f"{name} {_value_words(value)} (a setting the atlas has no words for)")
    words = ("The mixture of experts' own section of the config: " + "; ".join(parts) if parts else
             "The mixture of experts' own section of the config, empty")
    missing = [name for name in ("ffn_act_fn", "moe_normalize_expert_weights") if name not in v]
    if missing and _built_as(c, "DbrxForCausalLM"):
        words += f"; {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} absent, so DBRX's class defaults apply"
    return words


# --- what DeepseekV4ForCausalLM does differently with the router's keys ----------------------------

def _v4_notes() -> None:
    """Keys other models share, where DeepseekV4ForCausalLM uses them in its own way."""
    plain = {key: EXPLAIN[key] for key in ("scoring_func", "topk_method")}

    def scoring_func(key, v, c):
        if c.text(key) == "sqrtsoftplus":
            return ("The router scores each expert with the square root of softplus of its logit, each score on its own "
                    "(positive, and they need not sum to one)")
        return plain[key](key, v, c)

    def topk_method(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4):
            words += "; DeepseekV4ForCausalLM does not read it: its routers take the top scores plus a selection bias, in one group"
        return words

    for key, fn in (("scoring_func", scoring_func), ("topk_method", topk_method)):
        EXPLAIN[key] = fn


_v4_notes()


@explains("num_dense_layers")
def _num_dense_layers(key, v, c):
    n = c.count(key)
    return f"The first {_plural(n, 'block')} keep a dense MLP; every block after them has the mixture of experts"


_switch("use_expert_bias",
        "The router adds a stored bias per expert to the sigmoid scores when it picks the experts; the weights are the unbiased scores",
        "The router picks the experts by their scores alone, with no bias per expert")


@explains("expert_selection_fn")
def _expert_selection_fn(key, v, c):
    fn = c.text(key)
    if fn == "softmax":
        return "The router turns its logits into weights with a softmax over all the experts, then keeps the top ones"
    if fn == "sigmoid":
        return "The router scores each expert with a sigmoid of its logit, each score on its own"
    c.fail(key, f'must be "softmax" or "sigmoid", not {_value_words(fn)}')


@explains("shared_expert_combination_strategy")
def _shared_expert_combination(key, v, c):
    how = c.text(key)
    if how == "average":
        return "The block's output is the mean of the routed experts' sum and the shared expert's output, (routed + shared) / 2"
    if how == "sum":
        return "The block's output is the routed experts' sum plus the shared expert's output"
    c.fail(key, f'must be "average" or "sum", not {_value_words(how)}')


@explains("mlp_layer_types")
def _mlp_layer_types(key, v, c):
    if not isinstance(v, list) or not v or not all(t in ("sparse", "dense") for t in v):
        c.fail(key, 'must be a list of "sparse" or "dense", one per block')
    sparse = v.count("sparse")
    if sparse == len(v):
        return f"The MLP kind of each of the {len(v)} blocks: every block has the mixture of experts"
    return (f"The MLP kind of each of the {len(v)} blocks: {_plural(len(v) - sparse, 'block')} with a dense MLP, "
            f"{sparse} with the mixture of experts")


@explains("prefix_dense_intermediate_size")
def _prefix_dense_width(key, v, c):
    return f"The hidden width of the dense MLP in the blocks mlp_layer_types calls dense: {grouped(c.count(key))}"


@explains("prefix_dense_sliding_window_pattern")
def _prefix_dense_pattern(key, v, c):
    n = c.count(key)
    if n == 1:
        return ("The attention pattern of the leading dense blocks where layer_types is derived: 1, so each of them uses full "
                "attention, and a dense block under this setting keeps rotary positions even with full attention")
    return (f"The attention pattern of the leading dense blocks where layer_types is derived: every {_ordinal(n)} of them uses "
            "full attention, the others a sliding window")


# --- AFMoE's (Trinity's) names for the router's settings ------------------------------------

_alias("score_func", "scoring_func")
_alias("num_expert_groups", "n_group")
_alias("num_limited_groups", "topk_group")
_alias("route_norm", "norm_topk_prob")


@explains("route_scale")
def _route_scale(key, v, c):
    scale = c.number(key)
    if scale == 1:
        return "The chosen experts' weights are used as they are, multiplied by 1"
    return f"The chosen experts' weights are multiplied by {_num(scale)} after they are renormalized"


@explains("load_balance_coeff")
def _load_balance(key, v, c):
    return f"Weight {_num(c.number(key))} of the experts' load balancing in training; no effect on a forward pass"


_switch("use_grouped_mm", "The original code runs the experts as one grouped matrix product; the same arithmetic, another kernel",
        "The original code runs the experts one by one; the arithmetic is the same")
