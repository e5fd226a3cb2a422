"""The preview run: the family's own transformers class, tiny and seeded, traced on a fixed prompt.

The tiny config is derived from the pinned one by rule: the same block kinds in the same pattern
(DeepSeek-style "first k blocks dense" keeps its k dense blocks and adds two mixture blocks), the same
routing rule, expert groups, top-k ratio and scaling factor, the same rotary settings, and small
widths. Weights come from a fixed seed, the router's selection bias included, so the experts picked
differ from a plain top-k of the scores. The prompt is tokenized as UTF-8 bytes (the tiny vocabulary
is the 256 byte values), so no tokenizer is needed.

The model runs twice under ``atlas.model.trace``: once under the implementations transformers picks by
default (sdpa attention, grouped_mm experts) and once under eager attention and experts. A value the
eager run captures and the default run does not is conditional on eager. The identities a page
states are measured on the eager run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from atlas.model.introspect import num_blocks

SEED = 20250711
PROMPT = "Every layer adds to the stream."
TOLERANCE = 1e-5  # the largest absolute residual an identity may show at float32
MAX_AXIS = 64  # preview tensors keep at most this many entries per axis (evenly strided)

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_attention_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "vocab_size": 256,
}
TINY_TOP_K = 2
TINY_SLIDING_WINDOW = 8


def _period(pattern: list) -> int:
    """The shortest p with pattern[i] == pattern[i % p] for every i."""
    return next(p for p in range(1, len(pattern) + 1) if all(x == pattern[i % p] for i, x in enumerate(pattern)))


def tiny_values(config) -> dict[str, Any]:
    """The config values the preview changes, by the generic rule (a family's ``preview`` adds to it)."""
    from atlas.model.standard import TOP_K_KEYS, expert_key

    values: dict[str, Any] = {k: v for k, v in TINY.items() if getattr(config, k, None) is not None}
    heads, kv_heads = config.num_attention_heads, getattr(config, "num_key_value_heads", None)
    if kv_heads:
        values["num_key_value_heads"] = max(1, TINY["num_attention_heads"] * kv_heads // heads)
    derived_head_dim = isinstance(getattr(type(config), "head_dim", None), property)  # width / heads (Falcon): follows the tiny sizes
    # latent attention sizes its heads apart: a qk_rope_head_dim that is set, not a key left null (Hunyuan's copy)
    if getattr(config, "head_dim", None) and not getattr(config, "qk_rope_head_dim", None) and not derived_head_dim:
        values["head_dim"] = 16
    first_dense = getattr(config, "first_k_dense_replace", None)
    values["num_hidden_layers"] = (first_dense + 2) if first_dense is not None else 3
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        # One whole period of the attention pattern (5 local then 1 global on Gemma 3), at least 3 blocks.
        period = _period(list(layer_types))
        if period > len(layer_types) // 2 and period > 3:
            # a pattern that does not repeat (a hybrid's hand-placed attention blocks): the shortest
            # start of it that has every kind of block
            period = next(n for n in range(1, period + 1) if set(layer_types[:n]) == set(layer_types))
        values["num_hidden_layers"] = max(period, values["num_hidden_layers"])
        values["layer_types"] = list(layer_types[: values["num_hidden_layers"]])
    no_rope = getattr(config, "no_rope_layers", None)
    if no_rope:
        # One whole period of the blocks that skip their rotary angles too (3 rotary, 1 NoPE on SmolLM3).
        flags = list(no_rope)[: config.num_hidden_layers]
        values["num_hidden_layers"] = max(_period(flags), values["num_hidden_layers"])
        values["no_rope_layers"] = flags[: values["num_hidden_layers"]]
        if layer_types:
            values["layer_types"] = list(layer_types[: values["num_hidden_layers"]])
    mlp_kinds = getattr(config, "mlp_layer_types", None)
    if mlp_kinds and len(mlp_kinds) == config.num_hidden_layers:
        # one entry per block (dense or sparse MLP): the tiny stack's first blocks, as the generic rule keeps them
        values["mlp_layer_types"] = list(mlp_kinds[: values["num_hidden_layers"]])
    values.update(tiny_ssm_values(config))
    if getattr(config, "sliding_window", None):
        values["sliding_window"] = TINY_SLIDING_WINDOW  # shorter than the prompt, so the window shows
    if getattr(config, "attention_chunk_size", None):
        values["attention_chunk_size"] = TINY_SLIDING_WINDOW  # likewise the chunks of chunked attention
    if getattr(config, "attn_temperature_tuning", None) and getattr(config, "floor_scale", None):
        # the positions per step of the query temperature (Llama 4's NoPE blocks): short, so the temperature rises on the prompt
        values["floor_scale"] = TINY_SLIDING_WINDOW // 2
    experts_key = expert_key(config)
    top_k_key = next((k for k in TOP_K_KEYS if getattr(config, k, None)), None)
    if experts_key and top_k_key:
        # the same share of experts per token: top_k / experts stays the pinned ratio
        experts = round(TINY_TOP_K * getattr(config, experts_key) / getattr(config, top_k_key))
        values[experts_key] = experts
        values[top_k_key] = TINY_TOP_K
    values.update(tiny_linear_attention(config))
    values.update(tiny_indexer(config))
    if getattr(config, "indexer_types", None):  # which blocks run their own indexer: the tiny stack's first ones
        values["indexer_types"] = list(config.indexer_types[: values["num_hidden_layers"]])
    values["initializer_range"] = TINY["hidden_size"] ** -0.5  # wide enough weights for visible patterns
    for token in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if hasattr(config, token):
            values[token] = None
    return values


TINY_INDEX_TOPK = 8  # shorter than the prompt: the later queries' indexers drop positions
TINY_INDEX_HEADS = 4
TINY_INDEX_HEAD_DIM = 16  # twice the tiny rotary width: half the indexer's head is rotated, half is not


def tiny_indexer(config) -> dict[str, Any]:
    """A sparse attention's lightning indexer (DeepSeek Sparse Attention), small: four heads of 16 dims,
    and fewer positions kept than the prompt has, so the selection drops some."""
    if not isinstance(getattr(config, "index_topk", None), int):
        return {}
    return {"index_topk": TINY_INDEX_TOPK, "index_n_heads": TINY_INDEX_HEADS, "index_head_dim": TINY_INDEX_HEAD_DIM}


TINY_LINEAR_KEY_HEADS = 2
TINY_LINEAR_HEAD_DIM = 16


def tiny_linear_attention(config) -> dict[str, Any]:
    """Linear attention's own heads, small: two key heads, value heads in the pinned ratio to them
    (several value heads share a key head where the checkpoint's do), 16 dims a head."""
    values: dict[str, Any] = {}
    key_heads = getattr(config, "linear_num_key_heads", None)
    if key_heads:
        ratio = max(1, (getattr(config, "linear_num_value_heads", None) or key_heads) // key_heads)
        values["linear_num_key_heads"] = TINY_LINEAR_KEY_HEADS
        if getattr(config, "linear_num_value_heads", None):
            values["linear_num_value_heads"] = TINY_LINEAR_KEY_HEADS * ratio
    elif getattr(config, "linear_num_heads", None):
        values["linear_num_heads"] = TINY_LINEAR_KEY_HEADS
    for key in ("linear_key_head_dim", "linear_value_head_dim", "linear_head_dim"):
        if getattr(config, key, None):
            values[key] = TINY_LINEAR_HEAD_DIM
    return values


# A state-space mixer's sizes at the preview (each config key a family may use): 8 heads of 8 channels in
# 2 groups, a state of 16 per channel, chunks shorter than the prompt so that the chunked scan carries
# its state across chunk boundaries.
TINY_SSM = {
    "mamba_num_heads": 8, "mamba_n_heads": 8,
    "mamba_head_dim": 8, "mamba_d_head": 8,
    "ssm_state_size": 16, "mamba_d_state": 16,
    "n_groups": 2, "mamba_n_groups": 2,
    "chunk_size": 8, "mamba_chunk_size": 8,
    "mamba_d_ssm": 64,
    "mamba_dt_rank": 8,  # the first Mamba's low-rank time step (Jamba)
}


def tiny_ssm_values(config) -> dict[str, Any]:
    from atlas.model.standard import ssm_sizes

    if not ssm_sizes(config):
        return {}
    values = {k: v for k, v in TINY_SSM.items() if isinstance(getattr(config, k, None), int)}
    expand = getattr(config, "mamba_expand", None)
    if isinstance(expand, int) and "mamba_d_head" in values and "mamba_d_ssm" not in values:
        # the inner width is tied to the width (Granite 4.0-H: mamba_expand × hidden_size = heads × head_dim)
        values["mamba_d_head"] = expand * TINY["hidden_size"] // values["mamba_n_heads"]
    return values


def tiny_per_layer(config, values: dict[str, Any]) -> dict[str, Any]:
    """A configuration whose blocks differ in some size (Gemma 4's global blocks: wider heads, fewer
    key-value heads) keeps that difference at the tiny sizes: each block of the tiny stack that the
    pinned one builds with its own values gets them shrunk by the same rule, a head size in the pinned
    ratio to the others' (512 against 256 becomes 32 against 16)."""
    from atlas.inputs.layers import global_config, layer_config, overrides

    pinned = overrides(config)
    if not pinned:
        return {}
    whole = global_config(config)
    layers = values.get("num_hidden_layers", config.num_hidden_layers)
    tiny: dict[int, dict[str, Any]] = {}
    for index, changed in pinned.items():
        if index >= layers:
            continue
        shrunk = tiny_values(layer_config(config, index))
        own: dict[str, Any] = {}
        for key, value in changed.items():
            base, tiny_base = getattr(whole, key, None), values.get(key)
            if key == "head_dim" and _integer_ratio(value, base, tiny_base):
                own[key] = tiny_base * value // base
            else:
                own[key] = shrunk.get(key, value)
        tiny[index] = own
    return {"per_layer_config": tiny}


def _integer_ratio(value, base, tiny_base) -> bool:
    return all(isinstance(v, int) and v > 0 for v in (value, base, tiny_base)) and (tiny_base * value) % base == 0


def tiny_config(family, pinned_config):
    """The tiny config: the pinned config with the generic rule's and the family's changes applied."""
    from atlas.inputs.layers import global_config

    values = tiny_values(global_config(pinned_config))
    values.update(tiny_per_layer(pinned_config, values))
    if family.preview is not None:
        values.update(family.call("preview", pinned_config))
    raw = pinned_config.to_dict()
    for derived in ("model_type", "transformers_version", "architectures", "head_dim", "num_local_experts", "qk_head_dim"):
        if derived not in values:
            raw.pop(derived, None)
    raw.update(values)
    # a value the class derives from others (Falcon-H1's and Jamba's block types: a property without a
    # setter, reached directly or through attribute_map) cannot be given: the fields it derives from are
    # given instead, and the tiny config derives it again
    cls = type(pinned_config)
    for key in list(raw):
        target = getattr(cls, "attribute_map", {}).get(key, key)
        attribute = getattr(cls, target, None)
        if isinstance(attribute, property) and attribute.fset is None:
            raw.pop(key)
    return cls(**raw)


def prompt_tokens(prompt: str = PROMPT) -> tuple[list[int], list[str]]:
    ids = list(prompt.encode("utf-8"))
    return ids, [chr(b) if 32 < b < 127 else ("␣" if b == 32 else f"<{b}>") for b in ids]


MAX_PREVIEW_PARAMETERS = 10**8  # far above any tiny config (well under a million), far below a real checkpoint


def _check_tiny(family, model_class, config) -> None:
    """The tiny config must build a tiny model: counted on the meta device first, so a size the generic
    rule does not reach (DBRX keeps its expert sizes in a sub-config) is one clear error instead of a
    process killed for memory while the experts are allocated."""
    import torch

    from atlas.errors import AtlasError

    with torch.device("meta"):
        n = sum(p.numel() for p in model_class(config).parameters())
    if n > MAX_PREVIEW_PARAMETERS:
        raise AtlasError(f"atlas/families/{family.name}.py", "preview",
                         f"the tiny config still builds {n:,} parameters (the preview's bound is {MAX_PREVIEW_PARAMETERS:,}): "
                         "some size escapes the generic rule (a nested sub-config?); shrink it in the family's preview function")


def build_preview_model(family, config, seed: int = SEED):
    """The family's model class at the tiny config, weights from ``seed``, in eval mode."""
    import torch

    from atlas.inputs.checkpoint import transformers_class

    model_class = transformers_class(family, "model_class")
    _check_tiny(family, model_class, config)
    torch.manual_seed(seed)
    model = model_class(config).eval()
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        # transformers starts biases at zero and norm gains at one (or zero offsets): a step that
        # forgot a bias or a gain would still reproduce the module. Every vector parameter moves off
        # its starting value, so the equations' proof sees each one.
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.1)
        from atlas.model.introspect import find_block_list
        from atlas.proof.stack import own_scalar

        try:
            _, blocks = find_block_list(model, config.num_hidden_layers)
        except Exception:  # a model the block finder cannot read fails later, by name
            blocks = []
        for block in blocks:
            # a stored number that scales the block's output (Gemma 4's layer_scalar, 1 at the start):
            # moved off 1, so a proof that forgot it would not reproduce the block
            name = own_scalar(block)
            if name is not None:
                getattr(block, name).mul_(1 + 0.25 * torch.rand((), generator=generator))
        from atlas.proof.compressed import is_compressed_indexer, is_window_compressor

        for module in model.modules():
            if is_window_compressor(module) or is_compressed_indexer(module):
                # a bias per slot of the pooling window (DeepSeek-V4's position_bias) starts at zero: moved off it,
                # so a proof that pooled by the gates alone would not reproduce the compressor
                module.position_bias.add_(torch.randn(module.position_bias.shape, generator=generator) * 0.5)
            bias = getattr(module, "e_score_correction_bias", None)
            if bias is not None:
                # a selection bias of the scores' own size, so the chosen experts change for some tokens
                bias.copy_(torch.randn(bias.shape, generator=generator) * 0.05)
            table = getattr(module, "tid2eid", None)
            if table is not None and not table.is_floating_point():
                # a frozen token-id -> experts table (DeepSeek-V4's hash-routed blocks) starts at zero, every token on
                # expert 0 in every slot: each token gets its own seeded choice of distinct experts instead
                experts = getattr(module, "num_experts", None) or int(table.max()) + 1
                picks = torch.stack([torch.randperm(experts, generator=generator)[: table.shape[1]] for _ in range(table.shape[0])])
                table.copy_(picks.to(table.dtype))
    return model


@dataclass
class PreviewRun:
    family: str
    config: Any  # the tiny transformers config
    model: Any  # the tiny model, left under eager attention and experts
    ids: Any  # (1, seq) prompt ids
    tokens: list[int]
    labels: list[str]
    default: Any  # atlas.model.trace.Trace under the default implementations
    eager: Any  # atlas.model.trace.Trace under eager attention and experts
    default_implementations: dict[str, str | None]
    weights: str | None = None  # the local checkpoint directory the weights came from, if any


@cache
def preview_run(name: str) -> PreviewRun:
    """The family's preview run (once per process: the notes and the facts share it)."""
    from atlas.inputs.checkpoint import load_pinned, transformers_config
    from atlas.families import load

    family = load(name)
    return run(family, transformers_config(family, load_pinned(family.checkpoint, section=family.config_section)))


def run(family, pinned_config) -> PreviewRun:
    """The preview run at the tiny config, on seeded random weights."""
    import torch

    config = tiny_config(family, pinned_config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same sums in the same order on every machine
    try:
        return run_model(family, build_preview_model(family, config))
    finally:
        torch.set_num_threads(threads)


def run_model(family, model, weights: str | None = None) -> PreviewRun:
    """The prompt through ``model``, traced under its default implementations and under eager ones.

    ``weights`` names the local checkpoint the model was loaded from (None: seeded random weights).
    """
    import torch

    from atlas.model.trace import trace

    overrides = dict(family.standard_overrides)
    tokens, labels = prompt_tokens()
    tokens = [t % model.config.vocab_size for t in tokens]  # a small vocabulary still reads every byte
    ids = torch.tensor([tokens])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        with trace(model, overrides) as default:
            model(ids, attention_mask=mask)
        if type(model)._can_set_attn_implementation():
            model.set_attn_implementation("eager")
        else:  # attention computed inline (Falcon): it reads the config's choice at every call
            model.config._attn_implementation_internal = "eager"
        if default.implementations["experts"] is not None:
            model.set_experts_implementation("eager")
        with trace(model, overrides) as eager:
            model(ids, attention_mask=mask)
    return PreviewRun(family.name, model.config, model, ids, tokens, labels, default, eager, default.implementations, weights)


# --- conditions ------------------------------------------------------------------------------------


def conditions(preview: PreviewRun) -> dict[str, str]:
    """Values the eager run captured at some block and the default run did not: name -> condition."""
    found = {}
    for (name, index), _ in preview.eager.captured.items():
        if (name, index) in preview.default.captured or name in found:
            continue
        knob = preview.eager.resolution.at(name, index).needs_eager
        what = {"attention": "eager attention only", "experts": "eager experts only"}.get(knob, "eager implementations only")
        setting = {"attention": "attn_implementation", "experts": "experts_implementation"}.get(knob)
        default = preview.default_implementations.get(knob) if knob else None
        found[name] = f'{what} ({setting}="eager"; the default, {default}, does not expose it)' if setting else what
    return found


# --- identities ------------------------------------------------------------------------------------


def _max_abs(tensor) -> float:
    return float(tensor.detach().abs().max()) if tensor.numel() else 0.0


def identities(preview: PreviewRun, not_applicable: dict[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """Every identity a page states, measured on the eager run: (identities, not applicable)."""
    import torch

    t = preview.eager
    config = preview.config
    blocks = range(len(t.layers))
    moe = [i for i in blocks if t.has("routed_output", i)]
    declared = dict(not_applicable or {})
    measured: list[dict] = []
    skipped: list[dict] = []

    def identity(ident: str, statement: str, where: list[int] | None, residual_of, why_not: str | None = None):
        why_not = declared.get(ident, why_not)
        if why_not or (where is not None and not where):
            skipped.append({"id": ident, "statement": statement, "why": why_not or "no block has the values"})
            return
        residuals = [residual_of(i) for i in where] if where is not None else [residual_of(None)]
        worst = max(residuals)
        measured.append({
            "id": ident,
            "statement": statement,
            "blocks": where,
            "max_abs_residual": float(f"{worst:.3g}"),
            "tolerance": TOLERANCE,
            "holds": worst <= TOLERANCE,
        })

    L = t.layers
    # which sublayers each block runs: (attention, MLP, state-space mixer); the attention-then-MLP identities
    # hold on the blocks that run those two (every block, but in a hybrid)
    runs = {i: (t.has("attention_output", i), t.has("mlp_output", i), t.has("ssm_output", i)) for i in blocks}
    both = [i for i in blocks if runs[i] == (True, True, False)]
    scaled = residual_scale(config)
    if scaled is None:
        identity("block_sum", "layers[i].input + self_attn.attention_output + mlp.mlp_output == layer_output", both,
                 lambda i: _max_abs(L[i].input + L[i].self_attn.attention_output + L[i].mlp.mlp_output - L[i].output))
    else:  # each sublayer's output is scaled before it is added (Granite's residual_multiplier)
        s, words = scaled
        identity("block_sum", f"layers[i].input + {words} * (self_attn.attention_output + mlp.mlp_output) == layer_output", both,
                 lambda i: _max_abs(L[i].input + s * (L[i].self_attn.attention_output + L[i].mlp.mlp_output) - L[i].output))
    sequential = [i for i in both if i not in t.parallel]
    parallel_words = None if sequential or not both else ("every block is parallel: the attention and the MLP both read the block's input, "
                                              "so no stream exists between them to measure")
    if scaled is None:
        identity("attention_add", "layers[i].input + self_attn.attention_output == layer_mid", sequential,
                 lambda i: _max_abs(L[i].input + L[i].self_attn.attention_output - L[i].layer_mid), parallel_words)
    else:
        identity("attention_add", f"layers[i].input + {words} * self_attn.attention_output == layer_mid", sequential,
                 lambda i: _max_abs(L[i].input + s * L[i].self_attn.attention_output - L[i].layer_mid), parallel_words)
    # blocks of one sublayer (a hybrid's Mamba, attention or MLP blocks): the input plus that sublayer's output;
    # a state-space mixer in the attention's place, then an MLP: the input plus both outputs
    for ident, statement, pattern, value in (
        ("ssm_mlp_block_sum", "layers[i].input + ssm.ssm_output + mlp.mlp_output == layer_output", (False, True, True),
         lambda i: L[i].input + L[i].ssm.ssm_output + L[i].mlp.mlp_output),
        ("ssm_block_sum", "layers[i].input + ssm.ssm_output == layer_output", (False, False, True), lambda i: L[i].input + L[i].ssm.ssm_output),
        ("attention_block_sum", "layers[i].input + self_attn.attention_output == layer_output", (True, False, False),
         lambda i: L[i].input + L[i].self_attn.attention_output),
        ("mlp_block_sum", "layers[i].input + mlp.mlp_output == layer_output", (False, True, False), lambda i: L[i].input + L[i].mlp.mlp_output),
    ):
        where = [i for i in blocks if runs[i] == pattern]
        if where:
            identity(ident, statement, where, lambda i, value=value: _max_abs(value(i) - L[i].output))
    # attention and a state-space mixer side by side (Falcon-H1): each output times the config's constant, both added at once
    two = [i for i in blocks if runs[i] == (True, True, True)]
    if two:
        s_out, a_out = _scale(config, "ssm_out_multiplier") or 1.0, _scale(config, "attention_out_multiplier") or 1.0
        words = (f"layers[i].input + ssm_out_multiplier ({s_out:g}) × ssm.ssm_output + attention_out_multiplier ({a_out:g}) × "
                 "self_attn.attention_output + mlp.mlp_output == layer_output")
        identity("two_mixers_block_sum", words, two, lambda i: _max_abs(
            L[i].input + s_out * L[i].ssm.ssm_output + a_out * L[i].self_attn.attention_output + L[i].mlp.mlp_output - L[i].output))
    shared = [i for i in moe if t.has("shared_expert_output", i)]
    if shared or not moe:
        identity("mixture_sum", "mlp.routed_output + mlp.shared_expert_output == mlp.mlp_output", shared,
                 lambda i: _max_abs(L[i].mlp.routed_output + L[i].mlp.shared_expert_output - L[i].mlp.mlp_output),
                 None if moe else "no block is a mixture of experts")
    else:  # a mixture without a shared expert: the routed experts are the whole MLP output
        identity("mixture_sum", "mlp.routed_output == mlp.mlp_output (no shared expert)", moe,
                 lambda i: _max_abs(L[i].mlp.routed_output - L[i].mlp.mlp_output))
    slotted = [i for i in moe if t.resolution.at("expert_outputs", i).read is not None]
    dense = [i for i in moe if t.has("router_scores", i)]  # every expert runs on every token, its input scaled (Llama 4)
    identity("expert_slots", "mlp.expert_outputs summed over the routing slots == mlp.routed_output", slotted,
             lambda i: _max_abs(L[i].mlp.expert_outputs.sum(dim=2) - L[i].mlp.routed_output),
             None if slotted else "no block is a mixture of experts" if not moe else
             "the mixture has no routing slots: every expert runs on every token, its input scaled by the token's score for it")
    if dense:
        k = config.num_experts_per_tok

        def dense_scores(i):
            z = L[i].mlp.router_logits
            top = z.topk(k, dim=-1)
            expected = torch.zeros_like(z).scatter(-1, top.indices, top.values.sigmoid())
            return _max_abs(L[i].mlp.router_scores - expected)

        identity("router_scores", f"mlp.router_scores == sigmoid(mlp.router_logits) at each token's top {k}, 0 elsewhere", dense, dense_scores)
    factor = getattr(config, "routed_scaling_factor", None)
    ffn_sub = getattr(config, "ffn_config", None)
    p_norm = getattr(ffn_sub, "moe_normalize_expert_weights", None) if ffn_sub is not None else None
    if p_norm:  # the chosen weights divided by their p-norm (DBRX): a unit p-norm, which for p = 1 is a sum of one
        identity("expert_weights_sum", f"mlp.expert_weights have a {p_norm:g}-norm of 1 at every token "
                 f"(ffn_config.moe_normalize_expert_weights is {p_norm:g})", moe,
                 lambda i: _max_abs(L[i].mlp.expert_weights.abs().pow(p_norm).sum(dim=-1).pow(1 / p_norm) - 1),
                 None if moe else "no block is a mixture of experts")
    elif getattr(config, "norm_topk_prob", False):
        target = factor if factor is not None else 1.0
        words = f"routed_scaling_factor ({factor})" if factor is not None else "1"
        identity("expert_weights_sum", f"mlp.expert_weights sum to {words} at every token", moe,
                 lambda i: _max_abs(L[i].mlp.expert_weights.sum(dim=-1) - target),
                 None if moe else "no block is a mixture of experts")
    elif moe:
        skipped.append({"id": "expert_weights_sum", "statement": "mlp.expert_weights sum to a fixed total at every token",
                        "why": "the router does not renormalize the chosen weights (norm_topk_prob is off)"})
    # softmax attention's identities, at the blocks that have it (a linear-attention or state-space block has no scores)
    softmax_blocks = [i for i in blocks if runs[i][0] and t.resolution.at("attention_probabilities", i).read is not None]
    identity("attention_rows", "self_attn.attention_probabilities sum to 1 over the keys, at every head and query", softmax_blocks,
             lambda i: _max_abs(L[i].self_attn.attention_probabilities.sum(dim=-1) - 1))
    identity("attention_softmax", "softmax(self_attn.attention_scores) == self_attn.attention_probabilities", softmax_blocks,
             lambda i: _max_abs(torch.softmax(L[i].self_attn.attention_scores.float(), dim=-1) - L[i].self_attn.attention_probabilities))
    if t.has("embedding_norm_output"):  # a norm on the token embeddings (BLOOM): the first block reads its output
        identity("embeddings", "embedding_norm_output == layers[0].input", None,
                 lambda _: _max_abs(t.embedding_norm_output - L[0].input))
    elif t.has("position_embeddings"):  # learned positions (GPT-2): the first block reads the sum
        identity("embeddings", "token_embeddings + position_embeddings == layers[0].input", None,
                 lambda _: _max_abs(t.token_embeddings + t.position_embeddings - L[0].input))
    elif _scale(config, "embedding_multiplier") is not None:  # the model scales the table's rows (Granite)
        m = _scale(config, "embedding_multiplier")
        identity("embeddings", f"embedding_multiplier ({m:g}) * token_embeddings == layers[0].input", None,
                 lambda _: _max_abs(m * t.token_embeddings - L[0].input))
    else:
        identity("embeddings", "token_embeddings == layers[0].input", None,
                 lambda _: _max_abs(t.token_embeddings - L[0].input))
    softcap = getattr(config, "final_logit_softcapping", None)
    divisor = _scale(config, "logits_scaling")
    scale = getattr(config, "logit_scale", None)
    if divisor is not None and not softcap and _head_reads_final_norm(preview):
        # the head reads the final norm's output as it is, so the model divides what the head returns
        identity("logits", f"lm_head_output / logits_scaling ({divisor:g}) == logits", None,
                 lambda _: _max_abs(t.lm_head_output / divisor - t.logits))
    elif _scale(config, "lm_head_multiplier") is not None and not softcap:  # the head's logits times a constant (Falcon-H1)
        head_multiplier = _scale(config, "lm_head_multiplier")
        identity("logits", f"logits == lm_head_multiplier ({head_multiplier:g}) × lm_head_output", None,
                 lambda _: _max_abs(t.logits - head_multiplier * t.lm_head_output))
    elif scale not in (None, 1, 1.0) and not softcap:  # the head's logits times a constant (Cohere)
        identity("logits", f"logits == logit_scale ({scale:g}) × lm_head_output", None,
                 lambda _: _max_abs(t.logits - scale * t.lm_head_output))
    else:
        identity("logits", "logits == lm_head_output", None, lambda _: _max_abs(t.logits - t.lm_head_output),
                 "the model softcaps the head's logits" if softcap else None)
    return measured, skipped


def _scale(config, key: str) -> float | None:
    """A scale the config sets under ``key``, where it is set and is not 1."""
    value = getattr(config, key, None)
    return None if value in (None, 1, 1.0) or isinstance(value, bool) else float(value)


def residual_scale(config) -> tuple[float, str] | None:
    """The factor a block multiplies each sublayer's output by before adding it to the stream, and how
    the config names it; None where the outputs are added as they are."""
    multiplier = _scale(config, "residual_multiplier")
    if multiplier is not None:
        return multiplier, f"residual_multiplier ({multiplier:g})"
    depth = getattr(config, "scale_depth", None)
    if depth is not None and not isinstance(depth, bool):  # MiniCPM: the factor shrinks with the number of blocks
        factor = depth / math.sqrt(config.num_hidden_layers)
        return factor, f"scale_depth / sqrt(num_hidden_layers) ({depth:g} / sqrt({config.num_hidden_layers}) = {factor:.6g})"
    return None


def _head_reads_final_norm(preview: PreviewRun) -> bool:
    """Whether the output head's output is the head applied to the final norm's output as it is (a
    model that divides by logits_scaling then divides what the head returns, not what it reads)."""
    import torch

    t = preview.eager
    if not t.has("final_norm_output"):
        return False
    with torch.no_grad():
        again = preview.model.get_output_embeddings()(t.final_norm_output)
    return _max_abs(again - t.lm_head_output) <= TOLERANCE


def selection_changes(preview: PreviewRun) -> dict[str, int]:
    """Per mixture block whose router adds a selection bias: tokens whose chosen experts differ from a
    plain top-k of the router's scores."""
    import torch

    from atlas.model.introspect import find_block_list

    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    changed = {}
    for i, layer in enumerate(preview.eager.layers):
        biased = any(getattr(m, "e_score_correction_bias", None) is not None for m in blocks[i].modules())
        if not biased or not preview.eager.has("router_logits", i):
            continue
        k = layer.mlp.expert_indices.shape[-1]
        plain = torch.topk(layer.mlp.router_logits, k, dim=-1).indices.sort(dim=-1).values  # monotone scores: same order
        chosen = layer.mlp.expert_indices.sort(dim=-1).values
        changed[str(i)] = int((plain != chosen).any(dim=-1).sum())
    return changed


# --- shapes ----------------------------------------------------------------------------------------


def tiny_sizes(preview: PreviewRun) -> dict[str, int]:
    from atlas.model.standard import checkpoint_sizes

    sizes = checkpoint_sizes(preview.config)
    batch, seq = preview.ids.shape
    sizes.update(batch=int(batch), seq=int(seq), query=int(seq), key=int(seq))
    return sizes


def tiny_block_sizes(preview: PreviewRun) -> dict[str, dict[str, int]]:
    """The sizes of the tiny model's blocks that differ between blocks: {block: {size: value}} (empty
    where every block is built alike)."""
    from atlas.model.standard import block_sizes, checkpoint_sizes

    config = preview.config
    whole = checkpoint_sizes(config)
    varying = [k for k, v in whole.items() if v is None]
    found = {}
    for i in range(config.num_hidden_layers):
        own = block_sizes(config, i)
        if any(own[k] is not None for k in varying):
            found[str(i)] = {k: own[k] for k in varying if own[k] is not None}
    found = found if any(own != whole for own in (block_sizes(config, i) for i in range(config.num_hidden_layers))) else {}
    for block, attended in attended_keys(preview).items():
        found.setdefault(block, {})["key"] = attended
    return found


def attended_keys(preview: PreviewRun) -> dict[str, int]:
    """Blocks that add compressed keys to their window (DeepSeek-V4): how many keys each attends on the
    prompt, the prompt's positions plus one key per closed window of compress_rates' size."""
    config = preview.config
    rates = getattr(config, "compress_rates", None)
    types = getattr(config, "layer_types", None) or []
    if not isinstance(rates, dict):
        return {}
    seq = int(preview.ids.shape[1])
    return {str(i): seq + seq // rates[t] for i, t in enumerate(types) if t in rates}


def captured_shapes(preview: PreviewRun) -> dict[str, dict[str, list]]:
    """Every captured value's shape on the eager run: {name: {block or "model": shape}}."""
    shapes: dict[str, dict[str, list]] = {}
    for (name, index), value in preview.eager.captured.items():
        shape = list(value.shape) if hasattr(value, "shape") else [len(value)]
        shapes.setdefault(name, {})["model" if index is None else str(index)] = shape
    return {name: dict(sorted(by.items(), key=lambda kv: (kv[0] != "model", int(kv[0]) if kv[0] != "model" else 0)))
            for name, by in sorted(shapes.items())}


def missing_on_the_run(preview: PreviewRun) -> dict[str, dict[str, str]]:
    """Values the tiny model's blocks lack, with the reason: {name: {block: reason}}."""
    missing: dict[str, dict[str, str]] = {}
    for index, placements in enumerate(preview.eager.resolution.blocks):
        for p in placements:
            if p.read is None:
                missing.setdefault(p.value.name, {})[str(index)] = p.missing
    return missing


def uncaptured(preview: PreviewRun) -> list[str]:
    """Values the resolver placed on the tiny model that the eager run did not capture (must be none)."""
    t = preview.eager
    gaps = []
    for index, placements in [(None, t.resolution.model)] + list(enumerate(t.resolution.blocks)):
        for p in placements:
            if p.read is not None and (p.value.name, index) not in t.captured:
                gaps.append(f"{p.value.name} at {'the model' if index is None else f'block {index}'} ({p.read.words()})")
    return gaps


# --- compact data ----------------------------------------------------------------------------------


def compact(tensor, integer: bool = False, max_axis: int = MAX_AXIS) -> dict[str, Any]:
    """A tensor as float16 values (or integers) in nested lists, long axes strided to ``max_axis`` entries."""
    import torch

    strides = []
    for axis, size in enumerate(tensor.shape):
        stride = math.ceil(size / max_axis)
        strides.append(stride)
        if stride > 1:
            tensor = tensor.index_select(axis, torch.arange(0, size, stride))
    if integer:
        data = tensor.to(torch.int64).tolist()
        return {"shape": list(tensor.shape), "dtype": "int64", "strides": strides, "data": data,
                "min": int(tensor.min()), "max": int(tensor.max())}
    half = tensor.detach().to(torch.float16)
    data = _rounded_table()[half.view(torch.int16).to(torch.int64) + 32768].tolist()
    if torch.isneginf(half).any():
        data = _masked_as_none(data)
    half = half.to(torch.float32)
    finite = half[torch.isfinite(half)]
    return {"shape": list(half.shape), "dtype": "float16", "strides": strides, "data": data,
            "min": float(f"{float(finite.min()):.4g}"), "max": float(f"{float(finite.max()):.4g}")}


@cache
def _rounded_table():
    """Every float16 value (indexed by its bits, offset to start at 0) rounded to 4 significant digits,
    as float16 holds about 3.3: a lookup for a whole tensor at once instead of formatting each entry."""
    import torch

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16).to(torch.float32)
    return torch.tensor([float(f"{v:.4g}") for v in every.tolist()], dtype=torch.float64)


def _masked_as_none(values):
    """-inf (an entry the mask hid, in masked scores) as None: JSON has no -inf."""
    if isinstance(values, list):
        return [_masked_as_none(v) for v in values]
    return None if values == float("-inf") else values


# Values drawn at every block of the run; every other captured value is kept at the first block of
# each kind of block the tiny model has (dense and mixture, sliding and global), which is enough to
# draw it on its page without making every value page carry every block.
EVERY_BLOCK = ("layer_output", "attention_probabilities", "mlp_output", "router_logits", "expert_weights", "expert_indices")

# The axis a value's drawing picks one slice of (a head, a routing slot): the grid shows the others.
PICKED_AXIS = ("num_heads", "num_kv_heads", "top_k")

HISTOGRAM_BINS = 40


def preview_tensors(preview: PreviewRun) -> dict[str, dict[str, Any]]:
    """Every value the eager run captured, compact, by key (``token_embeddings``, ``layers.1.mlp.routed_output``):
    the batch axis dropped (the run has one prompt), a head or routing-slot axis moved first."""
    from atlas.model.standard import LAYOUTS, layout_of, standard_value

    t = preview.eager
    sizes = tiny_sizes(preview)
    firsts = set(_first_of_each_kind(preview))
    tensors = {}
    for (name, index), value in t.captured.items():
        if index is not None and name not in EVERY_BLOCK and index not in firsts:
            continue
        dims = list(LAYOUTS[layout_of(name, sizes)])
        if not hasattr(value, "shape"):  # input_size: the call's (batch, seq)
            import torch

            value, dims = torch.tensor(list(value)), ["batch, seq"]
        elif dims and dims[0] == "batch":
            value, dims = value[0], dims[1:]
        picked = next((d for d in PICKED_AXIS if d in dims[1:]), None)
        if picked is not None and len(dims) == 3:  # a grid of the other two, one slice at a time
            axis = dims.index(picked)
            value = value.movedim(axis, 0)
            dims = [picked] + dims[:axis] + dims[axis + 1:]
        host = standard_value(name).host
        key = name if index is None else (f"layers.{index}.{name}" if host == "layers[i]" else f"layers.{index}.{host.split('.')[-1]}.{name}")
        integer = not value.is_floating_point()
        # a value drawn at one block per kind keeps its feature axes shorter: a drawing, not a record
        short = index is not None and name not in EVERY_BLOCK
        max_axis = MAX_AXIS // 2 if short else MAX_AXIS
        if "residual_streams" in dims:  # several residual streams (DeepSeek-V4) share the entries one stream would keep
            max_axis = max(8, max_axis // max(1, sizes.get("residual_streams") or 1))
        tensors[key] = {**compact(value, integer=integer, max_axis=max_axis), "axes": dims}
    return dict(sorted(tensors.items(), key=lambda kv: _key_order(kv[0])))


def _key_order(key: str) -> tuple:
    """layers.10 after layers.9: numeric parts compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def parallel_at_checkpoint(preview: PreviewRun, checkpoint_kinds: list[dict[str, Any]]) -> list[int]:
    """The checkpoint's blocks of the kinds whose blocks the run measured parallel (facts["block_kinds"]:
    the tiny model keeps the checkpoint's kinds, by label)."""
    from atlas.model.introspect import block_kinds, find_block_list, layer_types

    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    labels = {k.label for k in block_kinds(blocks, layer_types(preview.config)) if set(k.indices) <= set(preview.eager.parallel)}
    return sorted(i for k in checkpoint_kinds if k["label"] in labels for i in k["indices"])


def _first_of_each_kind(preview: PreviewRun) -> list[int]:
    from atlas.model.introspect import find_block_list, kinds_of_blocks

    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    return [k.indices[0] for k in kinds_of_blocks(blocks, preview.config)]


def weight_histograms(preview: PreviewRun) -> dict[str, dict[str, Any]]:
    """Every parameter and persistent buffer of the tiny model, by name, as a histogram of all its
    values (exact counts in equal bins between its smallest and largest value)."""
    import torch

    model = preview.model
    persistent = {name for name, _ in model.named_buffers() if _is_persistent(model, name)}
    # tied tensors under every name they have (lm_head.weight as well as embed_tokens.weight)
    named = list(model.named_parameters(remove_duplicate=False)) + [(n, b) for n, b in model.named_buffers() if n in persistent]
    out = {}
    for name, tensor in named:
        values = tensor.detach().float().flatten()
        lo, hi = float(values.min()), float(values.max())
        counts = torch.histc(values, bins=HISTOGRAM_BINS, min=lo, max=hi if hi > lo else lo + 1).to(torch.int64).tolist()
        out[name] = {"shape": list(tensor.shape), "elements": int(values.numel()), "bins": counts,
                     "min": float(f"{lo:.4g}"), "max": float(f"{hi:.4g}"), "mean": float(f"{float(values.mean()):.4g}"),
                     "std": float(f"{float(values.std()) if values.numel() > 1 else 0.0:.4g}")}
    return dict(sorted(out.items(), key=lambda kv: _key_order(kv[0])))


def _is_persistent(model, name: str) -> bool:
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    return leaf not in module._non_persistent_buffers_set


def preview_facts(preview: PreviewRun, family, checkpoint_config=None, checkpoint_kinds: list[dict] | None = None) -> dict[str, Any]:
    """facts["preview"]. The tiny run is compared with the pinned checkpoint: ``checkpoint_config``
    (its transformers config) and ``checkpoint_kinds`` (facts["block_kinds"]); where they are not
    given they are computed here from the pinned checkpoint."""
    from atlas.model.standard import checkpoint_sizes

    if checkpoint_config is None or checkpoint_kinds is None:
        checkpoint_config, checkpoint_kinds = _pinned_shape(family)
    measured, skipped = identities(preview, dict(family.not_applicable))
    from atlas.inputs.layers import global_config

    sizes = checkpoint_sizes(global_config(preview.config))  # the whole configuration's own; block_sizes has the others
    differences, kept = compare(preview.config, tiny_kinds(preview), checkpoint_config, checkpoint_kinds)
    return {
        "description": _description(preview, differences, kept),
        "differences": differences,
        "kept": kept,
        "weights": preview.weights,
        "seed": SEED,
        "prompt": PROMPT,
        "tokens": preview.tokens,
        "token_labels": preview.labels,
        "config": {"num_hidden_layers": num_blocks(preview.config), **sizes, **_tiny_raw(preview.config)},
        "implementations": {"default": preview.default_implementations, "eager": preview.eager.implementations},
        "conditions": conditions(preview),
        "identities": measured,
        "not_applicable": skipped,
        "selection_changed_by_bias": selection_changes(preview),
        "sizes": tiny_sizes(preview),
        **({"block_sizes": per_block} if (per_block := tiny_block_sizes(preview)) else {}),
        "shapes": captured_shapes(preview),
        "missing": missing_on_the_run(preview),
        "uncaptured": uncaptured(preview),
        "tensors": preview_tensors(preview),
        "weight_histograms": weight_histograms(preview),
    }


def _description(preview: PreviewRun, differences: list[dict[str, str]], kept: list[dict[str, str]]) -> str:
    """The run in words, its departures from the checkpoint written from ``differences`` and what it
    keeps from ``kept``: every size named here is the run's own or the checkpoint's, never typed."""
    model = type(preview.model).__name__
    if preview.weights is not None:
        text = (f"A real forward pass of transformers' {model} on CPU with the weights of the local checkpoint "
                f"{preview.weights}; the prompt is read as UTF-8 bytes.")
        theirs = "the pinned checkpoint"
    else:
        text = (f"A real forward pass of transformers' {model} on CPU at a tiny config derived from the pinned one, "
                "on seeded random weights, not the checkpoint's; the prompt is read as UTF-8 bytes.")
        theirs = "the checkpoint"
    if differences:
        text += f" Where it differs from {theirs}: " + "; ".join(
            f"{d['tiny']} ({theirs}: {d['checkpoint']})" for d in differences) + "."
    else:
        text += f" It matches {theirs} in every respect compared here."
    if kept:
        text += f" The same as {theirs}: " + "; ".join(k["value"] for k in kept) + "."
    return text


# --- the tiny run against the checkpoint -----------------------------------------------------------


def tiny_kinds(preview: PreviewRun) -> list[dict[str, Any]]:
    """The tiny model's block kinds, grouped by the same rule as the checkpoint's: [{label, count}]."""
    from atlas.model.introspect import find_block_list, kinds_of_blocks

    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    return [{"label": k.label, "count": len(k.indices)} for k in kinds_of_blocks(blocks, preview.config)]


def _pinned_shape(family) -> tuple[Any, list[dict[str, Any]]]:
    """The pinned checkpoint's transformers config and block kinds, from its meta-device model."""
    from atlas.inputs.checkpoint import build_on_meta, load_pinned, transformers_config
    from atlas.model.introspect import find_block_list, kinds_of_blocks

    pinned = load_pinned(family.checkpoint, section=family.config_section)
    config = transformers_config(family, pinned)
    _, blocks = find_block_list(build_on_meta(family, config, pinned.config_path), num_blocks(config))
    return config, [{"label": k.label, "count": len(k.indices)} for k in kinds_of_blocks(blocks, config)]


def _count(n: int, label: str) -> str:
    return f"{n:,} {label}{'' if n == 1 else 's'}"


def _blocks_words(config, kinds: list[dict[str, Any]]) -> str:
    words = _count(num_blocks(config), "block")
    if len(kinds) > 1:
        parts = [_count(k["count"], k["label"]) for k in kinds]
        words += ": " + ", ".join(parts[:-1]) + " and " + parts[-1]
    return words


def _groups_words(groups: int, kept: int | None) -> str:
    if groups == 1:
        return "a single expert group"
    return f"the best {kept} of {groups} expert groups"


def _per_block_words(config, size: str, label: str) -> str:
    """A size that differs between blocks, in words: the most common value, then the others with the
    blocks that have them ("16 key/value heads (4 on 10 of 60 blocks)")."""
    from collections import Counter

    from atlas.model.standard import block_sizes

    n = config.num_hidden_layers
    counts = Counter(block_sizes(config, i)[size] for i in range(n))
    (common, _), *others = counts.most_common()
    first = _count(common, label) if label == "key/value head" else f"{common:,} {label}"
    rest = ", ".join(f"{v:,} on {c} of {n} blocks" for v, c in others)
    return f"{first} ({rest})" if rest else first


def _aspects(config, kinds: list[dict[str, Any]]) -> dict[str, str | None]:
    """What the comparison looks at, each in words at this config's values (None where it has none)."""
    from atlas.model.config_words import settings_words
    from atlas.model.standard import checkpoint_sizes

    s = checkpoint_sizes(config)
    get = lambda key: getattr(config, key, None)  # noqa: E731 - a config may lack any of these keys
    moe_width, experts = get("moe_intermediate_size"), s["num_experts"]
    # sizes a config keeps in sub-configs (DBRX's ffn_config and attn_config)
    ffn_sub, attn_sub = get("ffn_config"), get("attn_config")
    if moe_width is None and experts and ffn_sub is not None:
        moe_width = getattr(ffn_sub, "ffn_hidden_size", None)
    clip = get("clip_qkv") or (getattr(attn_sub, "clip_qkv", None) if attn_sub is not None else None)
    p_norm = getattr(ffn_sub, "moe_normalize_expert_weights", None) if ffn_sub is not None and experts else None
    if isinstance(moe_width, list):  # one width per layer (Hunyuan): words for it only where every layer agrees
        moe_width = moe_width[0] if moe_width and len(set(moe_width)) == 1 else None
    mlp_label = "dense MLP" if moe_width else ("expert" if experts else "MLP")
    if None in (s["num_kv_heads"], s["head_dim"], s["qk_head_dim"]):  # sizes of their own on some blocks (Gemma 4)
        heads = f"{_count(s['num_heads'], 'query head')}, {_per_block_words(config, 'num_kv_heads', 'key/value head')}"
        head_width = _per_block_words(config, "head_dim", "dims per head")
    else:
        heads = f"{_count(s['num_heads'], 'query head')}, {_count(s['num_kv_heads'], 'key/value head')}"
        head_width = (f"{s['qk_head_dim']} query/key and {s['head_dim']} value dims per head" if s["qk_head_dim"] != s["head_dim"]
                      else f"{s['head_dim']} dims per head")
    latent = None
    if get("kv_lora_rank"):
        query = f"a {get('q_lora_rank'):,}-wide query latent" if get("q_lora_rank") else "no query latent"
        latent = f"{query}, a {get('kv_lora_rank'):,}-wide key/value latent"
    rope = get("rope_parameters")
    softcaps = [f"{name} {get(key):g}" for key, name in (("attn_logit_softcapping", "attention softcap"),
                                                          ("final_logit_softcapping", "logit softcap")) if get(key)]
    return {
        "blocks": _blocks_words(config, kinds),
        "width": f"a residual width of {s['hidden_size']:,}",
        "heads": heads,
        "head width": head_width,
        "latents": latent,
        # (where intermediate_size only names the experts' width, as DeepseekV4Config maps it, there is no dense MLP to describe)
        "MLP width": (f"{mlp_label} hidden width {s['intermediate_size']:,}" if s["intermediate_size"]
                      and getattr(type(config), "attribute_map", {}).get("intermediate_size") != "moe_intermediate_size" else None),
        "expert width": f"expert hidden width {moe_width:,}" if moe_width else None,
        "routed experts": f"top-{s['top_k']} of {experts:,} routed experts" if experts else None,
        "shared experts": _count(get("n_shared_experts"), "shared expert") if get("n_shared_experts") else None,
        "expert groups": _groups_words(get("n_group"), get("topk_group")) if experts and get("n_group") else None,
        "renormalizing": (("the chosen weights renormalized" if get("norm_topk_prob") else "the chosen weights not renormalized")
                          if experts and get("norm_topk_prob") is not None else None),
        "weight norm": f"the chosen weights divided by their {p_norm:g}-norm" if p_norm else None,
        "QKV clip": f"the fused query-key-value projection clamped to ±{clip:g}" if clip else None,
        "scaling factor": f"a routed scaling factor of {get('routed_scaling_factor'):g}" if experts and get("routed_scaling_factor") else None,
        "window": f"a sliding window of {get('sliding_window'):,} positions" if get("sliding_window") else None,
        "chunks": f"attention chunks of {get('attention_chunk_size'):,} positions" if get("attention_chunk_size") else None,
        "query temperature": (f"a query temperature that steps up every {get('floor_scale'):,} positions (attn_scale {get('attn_scale'):g})"
                              if get("attn_temperature_tuning") and get("floor_scale") and get("attn_scale") is not None else None),
        "rotary": f"rotary settings {settings_words(rope)}" if isinstance(rope, dict) and rope else None,
        "softcaps": ", ".join(softcaps) if softcaps else None,
        "vocabulary": f"a vocabulary of {s['vocab_size']:,}",
        **_stream_aspects(config),
    }


def _stream_aspects(config) -> dict[str, str | None]:
    """DeepSeek-V4's own aspects: residual streams, pooled keys, output groups, the SwiGLU clamp, the
    indexer's keep (nothing for a config without them)."""
    get = lambda key: getattr(config, key, None)  # noqa: E731
    rates = get("compress_rates")
    if not isinstance(get("hc_mult"), int) or not isinstance(rates, dict):
        return {}
    return {
        "residual streams": f"{get('hc_mult')} residual streams mixed over {get('hc_sinkhorn_iters')} Sinkhorn rounds",
        "pooled keys": "a key pooled every " + " or every ".join(f"{r:,}" for r in sorted(set(rates.values()))) + " positions",
        "indexer keep": f"the indexer keeping {get('index_topk'):,} pooled keys" if get("index_topk") else None,
        "output groups": f"heads projected in {get('o_groups')} groups to {get('o_lora_rank'):,} values each",
        "SwiGLU clamp": f"gate and up projections clamped at {get('swiglu_limit'):g}" if get("swiglu_limit") else None,
    }


def compare(tiny_config, tiny_kinds: list[dict[str, Any]], checkpoint_config, checkpoint_kinds: list[dict[str, Any]]
            ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(differences, kept): each aspect the two configs both have, in words at each one's values;
    those whose words differ are differences ({what, tiny, checkpoint}), the others kept ({what, value})."""
    tiny, checkpoint = _aspects(tiny_config, tiny_kinds), _aspects(checkpoint_config, checkpoint_kinds)
    differences, kept = [], []
    for what in tiny:
        mine, theirs = tiny[what], checkpoint[what]
        if mine is None and theirs is None:
            continue
        if mine == theirs:
            kept.append({"what": what, "value": mine})
        else:
            differences.append({"what": what, "tiny": mine or f"no {what}", "checkpoint": theirs or f"no {what}"})
    return differences, kept


TINY_RAW_KEYS = (
    "first_k_dense_replace", "n_routed_experts", "num_local_experts", "num_experts", "num_experts_per_tok", "n_group",
    "topk_group", "routed_scaling_factor", "norm_topk_prob", "n_shared_experts", "moe_intermediate_size", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_interleave", "rope_parameters",
    "initializer_range", "index_topk", "index_n_heads", "index_head_dim",
    "hc_mult", "o_groups", "o_lora_rank", "swiglu_limit",  # DeepSeek-V4's streams, output groups and SwiGLU clamp
)


def _tiny_raw(config) -> dict[str, Any]:
    return {k: getattr(config, k) for k in TINY_RAW_KEYS if getattr(config, k, None) is not None}
