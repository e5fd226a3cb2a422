"""The released sizes of a family: every checkpoint of the same architecture, counted as exactly as the
one the family page is drawn from.

A family names its other sizes in ``Family.sizes`` (checkpoint folders under atlas/checkpoints/, each
a config.json and a checkpoint.json, as for the drawn checkpoint). Each is built on the meta device by
the family's own classes from its own config.json, through the same preflight as the drawn one (a
size config.json leaves out or mistypes stops the build naming its file), and gives one row: the exact
parameters, those a token runs through, the blocks and the width, the bytes a token adds to the KV
cache at 16 bits (the cost section's rule), and the predicted files' bytes by dtype, compared with the
size's pinned header figures where checkpoint.json pins any (atlas.check.claims fails the build on a
difference, as for the drawn checkpoint).

Where a size's file is a multimodal wrapper's (its text model under ``text_config``) and the family
reads a plain text config, the row counts that text model and says so: the vision tower is not part of
the architecture the page describes.
"""

from __future__ import annotations

from typing import Any

from atlas.cost.blocks import block_terms
from atlas.cost.coefficients import FIXED_STATES
from atlas.facts.published import comparison as published_comparison
from atlas.inputs import preflight
from atlas.inputs.checkpoint import build_on_meta, load_pinned, read_json_object, transformers_config
from atlas.inputs.checkpoint import CHECKPOINTS
from atlas.inputs.layers import layer_config
from atlas.model import introspect
from atlas.model.accounting import block_kind_accounting, model_accounting
from atlas.model.block_kinds import kinds_of_blocks
from atlas.model.sizes import experts_per_token

CACHE_BYTES = 2  # BF16, as the fact sheet states the cache


def released_sizes(family, facts: dict[str, Any], predicted_layout, checkpoint_check) -> list[dict[str, Any]]:
    """One row per released size, the drawn checkpoint's from its own facts, smallest total first;
    empty where the family names no other size. A size's files are predicted and its header figures
    given by the drawn checkpoint's own rules, passed in from atlas.facts.collect:
    ``predicted_layout(family, checkpoint, model, with_predictor=True)`` and
    ``checkpoint_check(checkpoint, layout, local, predictor)``."""
    if not family.sizes:
        return []
    rows = [_drawn(facts)] + [_measured(family, repo, predicted_layout, checkpoint_check) for repo in family.sizes]
    return sorted(rows, key=lambda r: (r["total"], r["repo"]))


def _drawn(facts: dict[str, Any]) -> dict[str, Any]:
    accounting, sheet = facts["accounting"]["model"], facts["sheet"]
    check = facts["checkpoint_check"]
    return {
        "repo": facts["checkpoint"]["repo"],
        "drawn": True,
        "built_as": None,
        "text_model_of": None,
        "config_source": facts["checkpoint"]["config_source"]["status"],
        "total": accounting["total"],
        "active": accounting["active"],
        "layers": facts["model"]["num_blocks"],
        "width": facts["config"]["standardized"].get("hidden_size"),
        "kv_cache_per_token": sheet["kv_cache"]["bytes"],
        "bytes_by_dtype": check["predicted"]["bytes_by_dtype"],
        "check": {"figures": [], "pinned_file": check["pinned_file"]},  # the family page's own section checks these
        "headers_checked": sum(1 for row in check["figures"] if row["checked"]),
        "published": facts["checkpoint"]["published"],
    }


def _architecture(whole: dict[str, Any]) -> str | None:
    """The class a config.json names first under ``architectures``, where it names one."""
    named = whole.get("architectures")
    return named[0] if isinstance(named, list) and named and isinstance(named[0], str) else None


def _other_class(family, whole: dict[str, Any], section: str | None) -> tuple[str, str] | None:
    """(model class, configuration class) where a size's file names a class of another model type than the
    family's (a mixture of experts listed beside dense sizes), each as transformers maps the file's
    model_type; None where the file is the family's own kind (or a wrapper of it)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_class = _architecture(whole)
    config_class = CONFIG_MAPPING_NAMES.get(whole.get("model_type"))
    if section is not None or model_class in (None, family.model_class, family.wrapper_class) or config_class in (None, family.config_class):
        return None
    return model_class, config_class


def _measured(family, repo: str, predicted_layout, checkpoint_check) -> dict[str, Any]:
    section, wrapper = family.config_section, family.wrapper_class
    whole = read_json_object(CHECKPOINTS / repo / "config.json")
    if section is None and isinstance(whole.get("text_config"), dict):
        # a wrapper's file (Gemma 3's 4B and up: Gemma3ForConditionalGeneration): the family's architecture
        # is its text model, and the file names the wrapper it was saved from
        section = "text_config"
        wrapper = _architecture(whole)
    # the drawn file's edits are its own, but the class that builds the family (an override of architectures:
    # EXAONE 3's files name their remote code's class) is the family's, for every size
    family_wide = [key for key in ("architectures",) if key in family.config_overrides]
    sized = family.but(checkpoint=repo, config_section=section, wrapper_class=wrapper,
                       config_overrides={key: family.config_overrides[key] for key in family_wide},
                       override_reasons={key: family.override_reasons[key] for key in family_wide if key in family.override_reasons})
    built_as = _other_class(family, whole, section)
    if built_as:  # a size of another class of the same line (Qwen3's mixtures beside its dense models)
        sized = sized.but(model_class=built_as[0], config_class=built_as[1], config_overrides={}, override_reasons={})
    checkpoint = load_pinned(repo, section=section)
    preflight.check_pinned(checkpoint)
    preflight.check_raw_config(sized, checkpoint)
    preflight.check_config_values(sized, checkpoint)
    config = transformers_config(sized, checkpoint)
    preflight.check_config(sized, checkpoint, config)
    with preflight.reads(config) as read:
        model = build_on_meta(sized, config, checkpoint.config_path)
    preflight.check_defaulted_sizes(sized, checkpoint, read)

    block_path, blocks = introspect.find_block_list(model, introspect.num_blocks(config))
    kinds = kinds_of_blocks(blocks, config)
    accounting = model_accounting(model, block_path, block_kind_accounting(blocks, kinds, block_path), blocks, experts_per_token(config))
    values = 0
    for kind in kinds:
        first = kind.indices[0]
        terms = block_terms(blocks[first], layer_config(config, first), kind.attention_type, family.name)
        if terms.attention not in FIXED_STATES:  # a fixed state does not grow with the context
            values += len(kind.indices) * terms.cache_values
    layout, predictor = predicted_layout(sized, checkpoint, model, with_predictor=True)
    check = checkpoint_check(checkpoint, layout, None, predictor)
    return {
        "repo": repo,
        "drawn": False,
        "text_model_of": "the file's text_config" if section == "text_config" and family.config_section is None else None,
        "built_as": built_as[0] if built_as else None,
        "config_source": (checkpoint.pinned.get("config_source") or {}).get("status", "not recorded"),
        "total": accounting["total"],
        "active": accounting["active"],
        "layers": len(blocks),
        "width": getattr(config, "hidden_size", None),
        "kv_cache_per_token": values * CACHE_BYTES,
        "bytes_by_dtype": check["predicted"]["bytes_by_dtype"],
        "check": {"figures": check["figures"], "pinned_file": check["pinned_file"]},
        "headers_checked": sum(1 for row in check["figures"] if row["checked"]),
        "published": published_comparison(checkpoint.pinned.get("published"), accounting),
    }
