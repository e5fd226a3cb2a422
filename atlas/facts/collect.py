"""Collect: the plain, JSON-serialisable facts of one family, computed from its model and checkpoint.

Everything a page shows comes from here. Nothing is rendered in this module; ``atlas.check.claims`` holds
the checks that can fail a build. Collecting runs two of them itself, where what it does next relies
on them: the preview's identities before the notes run, a local checkpoint's headers before its
weights are loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from atlas.facts.lineage import lineage
from atlas.facts.sheet import sheet
from atlas.facts.released_sizes import released_sizes
from atlas.facts.published import comparison as published_comparison
from atlas.facts import sources
from atlas.cost import figures as cost
from atlas.model import architecture, config_words, features, files, introspect
from atlas.model.accounting import block_kind_accounting, model_accounting, outside_trees
from atlas.model.block_kinds import blocks_without_rotary, index_ranges, kinds_of_blocks
from atlas.model.pinned_figures import figure_rows
from atlas.model.precision import float64_run
from atlas.model.resolver import mark_parallel, resolve
from atlas.model.roles import block_roles
from atlas.model.sizes import checkpoint_sizes, differing_block_sizes, experts_per_token
from atlas.model.support import describe_values, host_classes, hosted_values, support_facts
from atlas.inputs import preflight
from atlas.facts.early_checks import check_local_headers, check_preview
from atlas.inputs.checkpoint import build_on_meta, load_pinned, read_json_object, transformers_class, transformers_config
from atlas.facts.collected import Collected
from atlas.families import load
from atlas.errors import AtlasError
from atlas.inputs.dtypes import DTYPE_BYTES
from atlas.inputs.family import StoredTensor
from atlas.model.checkpoint_layout import LayoutPredictor, StoredRules, cut_unstored, expand_stored_buffers, layout_summary
from atlas.inputs.safetensors_headers import read_checkpoint

SCHEMA = 8  # the version of the facts' shape, pinned by atlas/facts/facts.schema.json (2: the shape is checked; 3: the predicted files; 4: config_source, overrides; 5: the fact sheet; 6: the vendor's published counts; 7: whether the config states a context; 8: a size built by another class)


def collect(name: str, weights: Path | None = None) -> Collected:
    family, checkpoint = preflight.check_inputs(name)
    preflight.check_config_values(family, checkpoint)
    config = transformers_config(family, checkpoint)
    preflight.check_config(family, checkpoint, config)
    with preflight.reads(config) as read:  # what the model takes from its config, to find silent defaults
        model = build_on_meta(family, config, checkpoint.config_path)
    preflight.check_defaulted_sizes(family, checkpoint, read)
    # the files decide what is counted: a tensor allocated larger than the files store it is cut to them
    not_stored = cut_unstored(model, checkpoint.pinned.get("not_stored"), config, str(checkpoint.pinned_path))

    block_path, blocks = introspect.find_block_list(model, introspect.num_blocks(config))
    kinds = kinds_of_blocks(blocks, config)
    kind_rows = block_kind_accounting(blocks, kinds, block_path)
    attention_name = block_roles(blocks[0]).attention
    attention = blocks[0].get_submodule(attention_name) if attention_name else None

    layout, predictor = _predicted_layout(family, checkpoint, model, with_predictor=True)
    outside = outside_trees(model, block_path)
    local = _local_checkpoint(family, checkpoint, model, weights) if weights is not None else None
    facts: dict[str, Any] = {
        "schema": SCHEMA,
        "family": {
            "name": family.name,
            "title": family.title,
            "vendor": family.vendor,
            "released": family.released,
            "summary": family.summary,
            "tags": list(family.tags),
            "module": family.module,
            "doc": family.doc,
        },
        "stack": {pkg: sources.installed_version(pkg) for pkg in ("torch", "transformers")},
        "checkpoint": {
            "repo": checkpoint.repo,
            "revision": checkpoint.require("revision"),
            "config_file": f"atlas/checkpoints/{checkpoint.repo}/config.json",
            "layout_notes": checkpoint.pinned.get("layout", []),
            "provenance": checkpoint.pinned.get("provenance", ""),
            "config_source": _config_source(checkpoint),
            "overrides": _overrides(family, checkpoint),
            # tensors transformers allocates larger than the files hold them: counted as the files hold them
            "not_stored": not_stored,
        },
        "model": {
            "class": type(model).__name__,
            "config_class": type(config).__name__,
            "block_path": block_path,
            "num_blocks": len(blocks),
            "block_class": type(blocks[0]).__name__,
            "attention_class": type(attention).__name__ if attention is not None else None,
            # the class of every module on the way to the block list, by path ("" is the model):
            # the owners of the block list and of the modules outside the blocks
            "containers": _containers(model, block_path),
            # transformers classes built on a torch layer (a scaled embedding on nn.Embedding): the
            # tensors of that layer are created by its constructor, which theirs calls
            "torch_bases": _torch_bases(model),
            # a multimodal wrapper's parts that are not the text model (vision tower, projector): counted apart
            "outside_text_model": _outside_text_model(family, checkpoint, model),
        },
        "config": {
            "standardized": _standardized_sizes(config),
            # blocks built with sizes of their own (Gemma 4's global blocks), against the standardized ones
            **({"block_sizes": own} if (own := differing_block_sizes(config, model)) else {}),
            # read again from the file: building the transformers config rewrites parts of the dict it
            # is given (rope_scaling gains rope_theta and rope_type), and the page shows the file
            "raw": _raw_config(checkpoint),
            # keys of config.json neither the configuration class nor the model reads
            "unread": _unread_keys(family, checkpoint, config, read, model),
        },
        "attention": _attention_facts(attention),
        "block_kinds": [
            {
                "id": k.id,
                "label": k.label,
                "indices": k.indices,
                "ranges": index_ranges(k.indices),
                "count": len(k.indices),
                "mixture": k.mixture,
                "attention_type": k.attention_type,
            }
            for k in kinds
        ],
        "blocks": [next(k.id for k in kinds if i in k.indices) for i in range(len(blocks))],
        "accounting": {
            "model": model_accounting(model, block_path, kind_rows, blocks, experts_per_token(config)),
            "block_kinds": kind_rows,
            "outside": outside,  # the component pages of embeddings, norm, head
        },
        "checkpoint_check": {**_checkpoint_check(checkpoint, layout, local, predictor),
                             # per model tensor of the first block of each kind and the outside modules:
                             # the stored name(s), dtype, shape, bytes; scales with the block they cover
                             "tensors": predictor.tensors_of(_page_tensors(kind_rows, outside))},
        "printout": introspect.printout(model),
        "excerpts": _excerpts(model),
    }
    # the vendor's counts beside ours, at the vendor's digits (atlas.check.claims fails a disagreement without a reason)
    facts["checkpoint"]["published"] = published_comparison(checkpoint.pinned.get("published"), facts["accounting"]["model"])
    # the preview run, its proofs, notes and cost measurements in float64 throughout (atlas.model.precision)
    with float64_run():
        run = _add_standard_names(facts, family, config, model, _local_preview_model(family, local) if local else None)
        facts["features"] = features.derive(facts, blocks_without_rotary(config))
        describe_values(facts["support"], architecture.profile(facts))
        facts["cost"] = cost.cost_facts(family.name, model, config, facts, layout, run)
    facts["lineage"] = lineage(model)
    facts["sheet"] = sheet(facts, getattr(config, "rope_parameters", None), blocks_without_rotary(config))
    facts["sizes"] = released_sizes(family, facts, _predicted_layout, _checkpoint_check)
    if local is not None:
        return Collected(facts, local["layout"], local["read"], pinned_layout=layout)
    return Collected(facts, layout)


def _add_standard_names(facts: dict[str, Any], family, config, model, local_model=None) -> None:
    """support(), the preview run and the notes; the printout lines gain the values their module hosts.
    The preview runs on ``local_model`` (loaded from --weights) where there is one; the run is returned."""
    from atlas.inputs import notes
    from atlas.model import preview, preview_facts
    from atlas import proof

    resolution = resolve(model, introspect.num_blocks(config), family.standard_overrides)
    if local_model is not None:
        run = preview.run_model(family, local_model, facts["checkpoint_check"]["local"]["directory"])
    else:
        run = preview.preview_run(family.name)
    facts["preview"] = preview_facts.preview_facts(run, family, config, facts["block_kinds"])
    mark_parallel(resolution, preview_facts.parallel_at_checkpoint(run, facts["block_kinds"]))
    facts["support"] = support_facts(
        resolution,
        checkpoint_sizes(config),
        facts["block_kinds"],
        facts["preview"]["conditions"],
        host_classes(model, resolution),
    )
    raw = facts["config"]["raw"]
    facts["config"]["explained"] = config_words.explain_config(
        raw, facts["checkpoint"]["config_file"], config_words.unread_keys(raw, type(model), type(config)), facts["stack"]["transformers"])
    # a key other families' files name another way -> that common name (GPT-2's n_layer: num_hidden_layers)
    facts["config"]["standard_names"] = config_words.standard_names(raw, type(config))
    hosted = hosted_values(resolution)
    seen: set[str] = set()
    for line in facts["printout"]:
        first = line["path"] not in seen and not line["text"].startswith(")")
        seen.add(line["path"])
        line["values"] = hosted.get(line["path"], []) if first else []
    # The notes' code relies on the identities: a broken one is reported as itself, not as a notes failure.
    check_preview(family.name, facts["preview"], data_size=False)
    tools = _tools(family.name, run, local=local_model is not None)  # before anything else runs on the model
    facts["equations"] = proof.equations(family, model, config, run, facts)
    facts["notes"] = notes.family_notes(family, facts, run)
    facts["tools"] = tools
    return run


def _tools(name: str, run, local: bool) -> dict[str, Any]:
    """How nnsight, nnterp and TransformerLens reach each value, each access read on the run; kept in the
    cache by what the preview run depends on (not the notes), except for a local checkpoint's run."""
    from atlas.facts import cache

    key = None if local else cache.tools_key(name)
    found = cache.load_tools(name, key) if key else None
    if found is None:
        from atlas.model.tool_runs import tools_facts  # the libraries are slow to import: only here

        found = tools_facts(run, name)
        if key:
            cache.store_tools(name, key, found)
    return found


def _unread_keys(family, checkpoint, config, read, model) -> list[str]:
    """The keys of config.json nothing reads, found two ways that must agree: measured (leaving the key
    out or changing it changes nothing the class loads or the meta build reads) and by name (no
    transformers code that could read it for this model names it)."""
    measured = preflight.unread_keys(family, checkpoint, config, read)
    by_name = config_words.unread_keys(checkpoint.config, type(model), type(config)) if measured else set()
    return [k for k in measured if k in by_name]


def _containers(model, block_path: str) -> dict[str, str]:
    parts = block_path.split(".")
    paths = [".".join(parts[:n]) for n in range(len(parts))]
    return {path: type(model.get_submodule(path) if path else model).__name__ for path in paths}


def _torch_bases(model) -> dict[str, str]:
    import torch

    found = {}
    for module in model.modules():
        cls = type(module)
        if cls.__module__.startswith("transformers."):
            base = next((b for b in cls.__mro__[1:] if b.__module__.startswith("torch.nn") and b is not torch.nn.Module), None)
            if base is not None:
                found[cls.__name__] = f"torch.nn.{base.__name__}"
    return dict(sorted(found.items()))


def _standardized_sizes(config) -> dict[str, int | None]:
    """The sizes every family names the same way (a family's own config may call them otherwise)."""
    from atlas.inputs.layers import global_config

    sizes = checkpoint_sizes(global_config(config))  # the whole configuration's own; block_sizes has the others
    return {"num_layers": introspect.num_blocks(config), **{k: sizes[k] for k in STANDARDIZED if k in sizes}}


STANDARDIZED = ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "qk_head_dim", "vocab_size", "intermediate_size")


def _attention_facts(attention) -> dict[str, Any]:
    scaling = getattr(attention, "scaling", None)
    return {"scaling": scaling, "scaling_rounded": round(scaling, 4) if scaling is not None else None}


def _page_tensors(kind_rows, outside: dict[str, dict[str, Any]]) -> list[str]:
    """The model names of the tensors that have pages: every tensor of each block kind's first block
    and of the modules outside the blocks."""
    def walk(node):
        yield from (f"{node['path']}.{t['name']}" for t in node["tensors"])
        for child in node["children"]:
            yield from walk(child)

    return [name for tree in [k["tree"] for k in kind_rows] + list(outside.values()) for name in walk(tree)]


def _predicted_layout(family, checkpoint, model=None, with_predictor=False):
    """The tensors the released files hold, predicted from config.json, quantization_config and the model
    (and, ``with_predictor``, the predictor that made them)."""

    def build(changes):
        if model is not None and not changes:
            return model
        changed = family.but(config_overrides={**family.config_overrides, **changes})
        return build_on_meta(changed, transformers_config(changed, checkpoint), checkpoint.config_path)

    raw = checkpoint.config
    whole = checkpoint.file_config or {}
    if not ({"torch_dtype", "dtype"} & set(raw)) and {"torch_dtype", "dtype"} & set(whole):
        # a wrapper's file names the weights' dtype once, beside its text_config (Gemma 3's 4B and up)
        raw = {**raw, **{k: whole[k] for k in ("torch_dtype", "dtype") if k in whole}}
    predict = LayoutPredictor(raw, build, _stored_rules(checkpoint))
    tensors = predict()
    entries = checkpoint.pinned.get("stored_buffers", [])
    if entries:
        # The configuration class knows the block count whatever config.json calls it (n_layer, ...).
        config = model.config if model is not None else transformers_config(family, checkpoint)
        tensors += expand_stored_buffers(entries, introspect.num_blocks(config))
    if family.stored_extras:
        tensors += family.call("stored_extras", checkpoint.config, predict)
    return (tensors, predict) if with_predictor else tensors


def _stored_rules(checkpoint) -> StoredRules:
    """checkpoint.json's rules for how the files store the model (all optional), each checked for type."""
    pinned, where = checkpoint.pinned, checkpoint.pinned_path
    dtype = pinned.get("weight_dtype")
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise AtlasError(where, "weight_dtype", f"{dtype!r} is not a safetensors dtype ({', '.join(DTYPE_BYTES)})")
    tied = pinned.get("tied_stored", [])
    if not isinstance(tied, list) or not all(isinstance(n, str) for n in tied):
        raise AtlasError(where, "tied_stored", "must be a list of tensor names")
    prefix = pinned.get("prefix_removed", "")
    if not isinstance(prefix, str):
        raise AtlasError(where, "prefix_removed", "must be a string such as 'transformer.'")
    return StoredRules(dtype, tuple(tied), prefix, str(where))


def _local_checkpoint(family, pinned, model, directory: Path) -> dict[str, Any]:
    """A local checkpoint directory: its headers, and the layout its own config.json predicts.

    A directory without config.json is taken to be the pinned checkpoint; one whose config differs
    (a smaller sibling, a test's tiny model) is predicted from its own values by the same rules, and
    only the pinned checkpoint's extra stored buffers are assumed where the config is the pinned one.
    """
    from atlas.inputs.checkpoint import PinnedCheckpoint, read_json_object

    read, described = read_checkpoint(directory)
    config_path = Path(directory) / "config.json"
    own = None
    if config_path.exists() and read_json_object(config_path) != pinned.config:
        own = PinnedCheckpoint(str(directory), Path(directory), read_json_object(config_path), {})
        layout = _predicted_layout(family, own)
    else:
        layout = _predicted_layout(family, pinned, model)
    roles = {t.name: t.role for t in layout}
    return {
        "layout": layout,
        "read": read,
        "checkpoint": own,  # the directory's own config, where it differs from the pinned one
        "facts": {
            "directory": str(directory),
            "files": described["files"],
            "index_total_size": described["index_total_size"],
            "summary": layout_summary([StoredTensor(t.name, t.dtype, t.shape, roles.get(t.name, "unexpected")) for t in read]),
        },
    }


LOCAL_PREVIEW_BYTES = 1 << 30  # a local checkpoint up to this size (and unquantized) feeds the preview run


def _local_preview_model(family, local: dict[str, Any]):
    """The family's model with the local checkpoint's own weights, where they are small enough to load
    on CPU and stored unquantized; None otherwise (the preview then keeps seeded random weights).
    The headers are checked against the prediction first, so a broken file is reported as such."""
    own = local["checkpoint"]
    if own is None or own.config.get("quantization_config") or local["facts"]["summary"]["payload_bytes"] > LOCAL_PREVIEW_BYTES:
        return None
    check_local_headers(local["facts"]["directory"], local["layout"], local["read"])
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model_class = transformers_class(family, "model_class")
    config = transformers_config(family, own)
    return model_class.from_pretrained(own.folder, config=config, dtype=torch.float64).eval()


def _checkpoint_check(checkpoint, layout, local, predictor=None) -> dict[str, Any]:
    pinned = checkpoint.require("safetensors")
    if not isinstance(pinned, dict):
        raise AtlasError(checkpoint.pinned_path, "safetensors", "must be an object of header figures ({} when none is known)")
    where = str(checkpoint.pinned_path)
    predicted = layout_summary(layout)
    index_facts, predicted_files = _predicted_files(checkpoint, layout, predictor, pinned, predicted)
    figures = figure_rows(predicted, pinned, where, predicted_files, checkpoint.pinned.get("figure_sources"), layout)
    if predicted_files is not None:  # the names stay out of the facts: a file's figures are what the page shows
        predicted_files = {**predicted_files, "files": [{k: v for k, v in f.items() if k != "names"} for f in predicted_files["files"]]}
    return {
        "predicted": predicted,
        "pinned": pinned,
        # Every figure beside its pinned value; "checked" is false where checkpoint.json pins none.
        "figures": figures,
        "not_checked": [row["figure"] for row in figures if not row["checked"]],
        "pinned_file": f"atlas/checkpoints/{checkpoint.repo}/checkpoint.json",
        "files": predicted_files,
        "index": index_facts,
        "sample": _layout_sample(layout),
        "local": local["facts"] if local else None,
    }


def _predicted_files(checkpoint, layout, predictor, pinned, predicted) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The index copy carried beside config.json, compared with the layout name by name (the files
    below rely on it), and the predicted files: one, those the index names, or those the sharding
    rule cuts."""
    where = str(checkpoint.pinned_path)
    writer = files.HeaderWriter.read(checkpoint.pinned.get("header_writer"), where)
    rule = files.ShardRule.read(checkpoint.pinned.get("shard_rule"), where)
    index, index_facts = None, None
    index_path = checkpoint.folder / files.INDEX_NAME
    if index_path.exists():
        index = files.read_index(index_path)
        counts = pinned.get("index_total_size_counts", "payload bytes")
        total = predicted["payload_bytes"] if counts == "payload bytes" else 2 * predicted["elements"]
        relative = f"atlas/checkpoints/{checkpoint.repo}/{files.INDEX_NAME}"
        files.check_index(relative, layout, index, total)
        index_facts = {"file": relative, "tensors": len(index["weight_map"]), "shards": len(set(index["weight_map"].values())),
                       "total_size": index["total_size"]}
    headers_path = checkpoint.folder / files.HEADERS_NAME
    if headers_path.exists():
        from atlas.inputs.checkpoint import read_json_object

        files.check_headers(f"atlas/checkpoints/{checkpoint.repo}/{files.HEADERS_NAME}", layout, read_json_object(headers_path))
    if rule is not None and index is not None:
        raise AtlasError(where, "shard_rule", f"the index copy {files.INDEX_NAME} beside it already says which file holds each tensor")
    ordered = files.save_order(layout, predictor.state_order()) if rule is not None and predictor is not None else None
    single = pinned.get("shards") == 1 or list(pinned.get("files") or {}) == [files.SINGLE_FILE]
    return index_facts, files.predicted_files(layout, ordered, index, rule, single, writer)


def _layout_sample(layout) -> list[dict[str, Any]]:
    """The stored tensors of the first block of each shape and those outside the blocks, expert lists cut to one."""
    import re

    index = re.compile(r"\.(\d+)\.")
    seen_shapes: set = set()
    sample = []
    for t in layout:
        key = index.sub(".N.", t.name)
        generic = (key, t.dtype, t.shape)
        if generic in seen_shapes:
            continue
        seen_shapes.add(generic)
        sample.append({"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "role": t.role})
    return sample


def _excerpts(model) -> dict[str, dict[str, Any]]:
    """The definition of every transformers class in the model, by class name."""
    classes = {}
    for module in model.modules():
        cls = type(module)
        if cls.__module__.startswith("transformers.") and cls.__name__ not in classes:
            classes[cls.__name__] = sources.class_excerpts(cls)
    return dict(sorted(classes.items()))


def _config_source(checkpoint) -> dict[str, Any] | None:
    """How close config.json is to the released file, with each guessed value as the file holds it."""
    from atlas.inputs.preflight import CONFIG_STATUSES, _dotted

    source = checkpoint.pinned.get("config_source")
    if source is None:
        return None
    guessed = [{"key": key, "value": _dotted(checkpoint.file_config or checkpoint.config, key), "why": why} for key, why in source.get("guessed", {}).items()]
    return {"status": source["status"], "meaning": CONFIG_STATUSES[source["status"]], "from": source["from"], "guessed": guessed}


def _overrides(family, checkpoint) -> list[dict[str, Any]]:
    """Every value the family changes before transformers reads config.json, with the file's value and why."""
    return [{"key": key, "in_file": checkpoint.config.get(key), "in_file_present": key in checkpoint.config,
             "value": value, "why": family.override_reasons[key]} for key, value in family.config_overrides.items()]


def _raw_config(checkpoint) -> dict[str, Any]:
    """config.json as the file has it (the text model's section of it, for a multimodal wrapper)."""
    raw = read_json_object(checkpoint.folder / "config.json")
    return raw[checkpoint.section] if checkpoint.section else raw


def _outside_text_model(family, checkpoint, model) -> dict[str, Any] | None:
    """What a multimodal wrapper holds besides the text model this family describes, by module: the
    wrapper is built on the meta device from the whole config.json, and every parameter that is not in
    the text model's own module (nor the head) is counted under the wrapper's module that holds it."""
    if not family.wrapper_class:
        return None
    import torch
    import transformers

    from atlas.inputs.checkpoint import transformers_class

    whole = {k: v for k, v in checkpoint.file_config.items() if k not in family.config_drop}
    whole[checkpoint.section] = {**checkpoint.config, **family.config_overrides}  # the text model as the family reads it
    try:
        wrapper_config = transformers.CONFIG_MAPPING[checkpoint.file_config.get("model_type")](**whole)
        with torch.device("meta"):
            wrapper = transformers_class(family, "wrapper_class")(wrapper_config)
    except (KeyError, TypeError, ValueError, AssertionError) as e:
        raise AtlasError(checkpoint.config_path, None, f"{family.wrapper_class} cannot be built from it: {e}") from None
    text_class = type(model.base_model)
    text_paths = [path for path, m in wrapper.named_modules() if type(m) is text_class]
    if len(text_paths) != 1:
        raise AtlasError(f"atlas/families/{family.name}.py", "wrapper_class",
                         f"{family.wrapper_class} holds {len(text_paths)} modules of {text_class.__name__}, not one")
    text_path = text_paths[0]
    text_parameters = sum(p.numel() for p in wrapper.get_submodule(text_path).parameters())
    parts: dict[str, dict[str, Any]] = {}
    for name, p in wrapper.named_parameters():
        if name.startswith(text_path + ".") or name.split(".")[0] == "lm_head":
            continue
        # the outermost module under the wrapper's base that holds it: model.vision_tower, model.embed_vision
        head, _, rest = name.partition(".")
        path = f"{head}.{rest.split('.')[0]}" if head == wrapper.base_model_prefix and "." in rest else head
        part = parts.setdefault(path, {"path": path, "class": type(wrapper.get_submodule(path)).__name__, "parameters": 0})
        part["parameters"] += p.numel()
    text_model_total = sum(p.numel() for p in model.base_model.parameters())
    if text_parameters != text_model_total:
        raise AtlasError(f"atlas/families/{family.name}.py", "wrapper_class",
                         f"the wrapper's {text_path} holds {text_parameters:,} parameters, the family's "
                         f"{family.model_class} {text_model_total:,}: the text model is not the same")
    return {"wrapper": family.wrapper_class, "text_model_path": text_path,
            "parts": sorted(parts.values(), key=lambda r: r["path"]),
            "parameters": sum(r["parameters"] for r in parts.values())}
