"""The preview run: the family's own transformers class, tiny and seeded, traced on a fixed prompt.

The class is built at the tiny config (``atlas.model.tiny``). Weights come from a fixed seed, the
router's selection bias included, so the experts picked differ from a plain top-k of the scores. The
prompt is tokenized as UTF-8 bytes (the tiny vocabulary is the 256 byte values), so no tokenizer is
needed.

The model runs twice under ``atlas.model.trace``: once under the implementations transformers picks by
default (sdpa attention, grouped_mm experts) and once under eager attention and experts. A value the
eager run captures and the default run does not is conditional on eager. The identities a page
states are measured on the eager run (``atlas.model.identities``); the run's record is
``atlas.model.preview_facts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from atlas.model.introspect import find_block_list
from atlas.model.precision import as_float64, at_float32, float64_run
from atlas.model.sizes import routed_experts
from atlas.model.structure import is_compressed_indexer, is_window_compressor, own_scalar
from atlas.model.tiny import tiny_config

SEED = 20250711
PROMPT = "Every layer adds to the stream."


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
    """The family's model class at the tiny config, weights from ``seed``, in eval mode, in float64."""
    from atlas.inputs.checkpoint import transformers_class

    model_class = transformers_class(family, "model_class")
    _check_tiny(family, model_class, config)
    with at_float32():  # drawn at float32 whatever the caller's precision: the same weights for every caller
        model = _seeded(model_class, config, seed)
    # the seeded weights as drawn (so the preview keeps its numbers), run in float64
    return as_float64(model, lambda: model_class(config))


def _seeded(model_class, config, seed: int):
    """The model with weights from ``seed``, every vector, a zero router and a few stored numbers moved off
    their starting values."""
    import torch

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
        experts = routed_experts(config)
        for name, parameter in model.named_parameters():
            if experts and parameter.dim() == 2 and parameter.shape[0] == experts and not parameter.any():
                # a router matrix transformers starts at zero (AFMoE's): every logit would be 0, every
                # expert tied, and no routing rule could be told from another; seeded values instead
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * config.initializer_range)
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
    with torch.no_grad(), float64_run():
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
