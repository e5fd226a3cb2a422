"""The safetensors header figures pinned in checkpoint.json, each checked against the predicted files.

The expected figures below are typed from the project's reference/HEADERS.md (public copies of the
released files), not from the build's output. The writer and the sharding rule the prediction
reproduces are held to the real safetensors and huggingface_hub libraries on files written here.
"""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

import pytest

from atlas.errors import AtlasError
from tests.conftest import ROOT, run_build

# reference/HEADERS.md, figure by figure: {family: {figure key: value}}; a file's figures as files.<name>.<figure>.
HEADERS = {
    "mistral": {
        "index_total_size": 14_483_464_192, "tensors": 291, "shards": 2,
        "files.model-00001-of-00002.safetensors.tensors": 203, "files.model-00002-of-00002.safetensors.tensors": 88,
        "files.model-00001-of-00002.safetensors.bytes": 9_942_981_696, "files.model-00002-of-00002.safetensors.bytes": 4_540_516_344,
        "index_file_bytes": 25_125,
    },
    "olmo2": {"index_total_size": 29_194_469_376, "tensors": 355, "shards": 6, "dtypes": "F32"},
    "qwen3_moe": {"index_total_size": 61_064_245_248, "tensors": 18_867, "shards": 16},
    "phi3": {
        "index_total_size": 7_642_159_104, "tensors": 195, "shards": 2,
        "files.model-00001-of-00002.safetensors.tensors": 128, "files.model-00002-of-00002.safetensors.tensors": 67,
        "files.model-00001-of-00002.safetensors.header_bytes": 14_952, "files.model-00002-of-00002.safetensors.header_bytes": 7_808,
        "files.model-00001-of-00002.safetensors.bytes": 4_972_489_328, "files.model-00002-of-00002.safetensors.bytes": 2_669_692_552,
    },
    "gpt_oss": {
        "index_total_size": 13_761_264_768, "tensors": 459, "shards": 3,
        "files.model-00000-of-00002.safetensors.tensors": 196, "files.model-00001-of-00002.safetensors.tensors": 197,
        "files.model-00002-of-00002.safetensors.tensors": 66,
    },
    "llama": {
        "index_total_size": 16_060_522_496, "shards": 4,
        "files.model-00001-of-00004.safetensors.bytes": 4_976_698_672, "files.model-00002-of-00004.safetensors.bytes": 4_999_802_720,
        "files.model-00003-of-00004.safetensors.bytes": 4_915_916_176, "files.model-00004-of-00004.safetensors.bytes": 1_168_138_808,
        "index_file_bytes": 23_950,
    },
    "qwen3": {
        "index_total_size": 16_381_470_720, "tensors": 399, "shards": 5,
        "files.model-00001-of-00005.safetensors.bytes": 3_996_250_744, "files.model-00002-of-00005.safetensors.bytes": 3_993_160_032,
        "files.model-00003-of-00005.safetensors.bytes": 3_959_604_768, "files.model-00004-of-00005.safetensors.bytes": 3_187_841_392,
        "files.model-00005-of-00005.safetensors.bytes": 1_244_659_840,
        "named_tensors.lm_head.weight": "in model-00005-of-00005.safetensors",
    },
    "qwen3_0_6b": {
        "shards": 1, "files.model.safetensors.bytes": 1_503_300_328, "files.model.safetensors.header_bytes": 35_552,
        "tensors": 311, "files.model.safetensors.tensors": 311, "payload_bytes": 1_503_264_768,
        "named_tensors.lm_head.weight": "1 tensor, in model.safetensors",
        "named_tensors.model.embed_tokens.weight": "1 tensor, in model.safetensors",
    },
    "gpt2": {
        "shards": 1, "files.model.safetensors.bytes": 548_105_171, "files.model.safetensors.header_bytes": 14_283,
        "tensors": 160, "files.model.safetensors.tensors": 160, "tensors_by_dtype.F32": 160, "payload_bytes": 548_090_880,
        "named_tensors.h.{block}.attn.bias": "12 tensors, F32, [1, 1, 1024, 1024]",
    },
    "gemma3": {"shards": 1, "files.model.safetensors.bytes": 1_999_811_208},
    "mixtral": {"shards": 19, "file_bytes": 93_405_713_504},
    "gemma2": {"shards": 8, "dtypes": "F32"},
}
REVISIONS = {"mistral": "27d67f1b", "olmo2": "7df9a825", "phi3": "f39ac1d2", "llama": "d04e592b", "qwen3": "b968826d",
             "qwen3_0_6b": "c1899de2", "gpt2": "607a30d7", "mixtral": "fc7ac946", "gemma2": "33c19302"}
INDEX_COPIES = {"mistral": 291, "olmo2": 355, "qwen3_moe": 18_867, "phi3": 195, "gpt_oss": 459}  # tensors each lists


def checkpoint_check(name, pinned_changes=None, root=None):
    """The family's checkpoint facts, from its checkpoint.json (changed by ``pinned_changes``, a function
    of the parsed file) without the preview run: the cheap part of collect."""
    from atlas.inputs.checkpoint import PinnedCheckpoint, load_pinned
    from atlas.facts.collect import _checkpoint_check, _predicted_layout
    from atlas.families import load

    family = load(name)
    checkpoint = load_pinned(family.checkpoint) if root is None else load_pinned(family.checkpoint, root)
    if pinned_changes is not None:
        pinned = copy.deepcopy(checkpoint.pinned)
        pinned_changes(pinned)
        checkpoint = PinnedCheckpoint(checkpoint.repo, checkpoint.folder, checkpoint.config, pinned)
    layout, predictor = _predicted_layout(family, checkpoint, with_predictor=True)
    return _checkpoint_check(checkpoint, layout, None, predictor)


_CACHE: dict = {}


def cached(name):
    if name not in _CACHE:
        _CACHE[name] = checkpoint_check(name)
    return _CACHE[name]


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_every_figure_of_headers_md_is_pinned_and_checked(name):
    from atlas.check.claims import check_checkpoint_totals

    check = cached(name)
    rows = {r["key"]: r for r in check["figures"]}
    for key, value in HEADERS[name].items():
        row = rows[key]
        assert row["checked"], f"{name}: {key} is not checked"
        assert row["pinned"] == value, f"{name}: {key} pinned {row['pinned']}, HEADERS.md says {value}"
        if row["bounds"] is None:
            assert row["predicted"] == value, f"{name}: {key} predicted {row['predicted']}, HEADERS.md says {value}"
        else:
            assert row["bounds"][0] <= value <= row["bounds"][1]
        assert row["source"] and row["confidence"], f"{name}: {key} names no source"
    check_checkpoint_totals(check)


@pytest.mark.parametrize("name", sorted(REVISIONS))
def test_the_revisions_of_headers_md_are_pinned(name):
    from atlas.families import load

    pinned = json.loads((ROOT / "atlas/checkpoints" / load(name).checkpoint / "checkpoint.json").read_text())
    assert pinned["revision"] == REVISIONS[name]
    assert "not a copy known to be taken at it" in pinned["revision_note"]


def _perturb(pinned: dict, key: str, row: dict) -> None:
    """Change the pinned figure behind ``key`` so that it disagrees with the prediction."""
    figures = pinned["safetensors"]
    if key.startswith("files."):
        name, figure = key[len("files."):].rsplit(".", 1)
        if row["bounds"] is not None:
            figures["files"][name][figure] = row["bounds"][1] + 1
        else:
            figures["files"][name][figure] += 1
    elif key.startswith("named_tensors."):
        known = figures["named_tensors"][key[len("named_tensors."):]]
        if "count" in known:
            known["count"] += 1
        else:
            known["file"] = "model-00001-of-00005.safetensors"
    elif key == "dtypes":
        figures["dtypes"] = ["BF16"]
    elif "." in key:
        group, dtype = key.split(".")
        figures[group][dtype] += 1
    else:
        figures[key] += 1


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_each_pinned_figure_changed_fails_naming_file_and_field(name):
    from atlas.check.claims import check_checkpoint_totals

    for key in HEADERS[name]:
        row = next(r for r in cached(name)["figures"] if r["key"] == key)
        check = checkpoint_check(name, lambda pinned: _perturb(pinned, key, row))
        with pytest.raises(AtlasError) as e:
            check_checkpoint_totals(check)
        assert e.value.where.endswith("/checkpoint.json"), key
        assert e.value.field == f"safetensors.{key}", (key, str(e.value))


@pytest.mark.parametrize("name", sorted(INDEX_COPIES))
def test_the_index_copies_are_carried_and_compared_name_by_name(name):
    check = cached(name)
    assert check["index"]["tensors"] == INDEX_COPIES[name] == check["predicted"]["tensors"]
    assert check["files"]["assigned_by"].startswith("the index copy")
    assert sum(f["tensors"] for f in check["files"]["files"]) == INDEX_COPIES[name]


def _index_changed(name, change):
    """The family's checkpoint with its index copy changed by ``change`` (a function of the parsed index)."""
    import shutil
    import tempfile

    from atlas.families import load

    repo = load(name).checkpoint
    root = Path(tempfile.mkdtemp(prefix="headers-index-"))
    shutil.copytree(ROOT / "atlas/checkpoints" / repo, root / repo)
    path = root / repo / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    change(index)
    path.write_text(json.dumps(index))
    return root


@pytest.mark.parametrize("change, field, problem", [
    (lambda i: i["weight_map"].pop("model.layers.3.mlp.down_proj.weight"), "weight_map: model.layers.3.mlp.down_proj.weight",
     "predicted, but the index lists no such tensor"),
    (lambda i: i["weight_map"].update({"model.layers.3.mlp.extra.weight": "model-00001-of-00002.safetensors"}),
     "weight_map: model.layers.3.mlp.extra.weight", "listed in the index, but the predicted layout has no such tensor"),
    (lambda i: i["metadata"].update(total_size=i["metadata"]["total_size"] + 2), "metadata.total_size", "14,483,464,194, the prediction gives 14,483,464,192"),
])
def test_an_index_that_differs_from_the_prediction_is_one_error(change, field, problem):
    root = _index_changed("mistral", change)
    with pytest.raises(AtlasError) as e:
        checkpoint_check("mistral", root=root)
    assert e.value.where == "atlas/checkpoints/mistralai/Mistral-7B-v0.1/model.safetensors.index.json"
    assert (e.value.field, e.value.problem) == (field, problem)


def test_a_tensor_moved_to_another_shard_changes_the_files_figures():
    from atlas.check.claims import check_checkpoint_totals

    root = _index_changed("phi3", lambda i: i["weight_map"].update({"model.norm.weight": "model-00001-of-00002.safetensors"}))
    with pytest.raises(AtlasError) as e:
        check_checkpoint_totals(checkpoint_check("phi3", root=root))
    assert e.value.field == "safetensors.files.model-00001-of-00002.safetensors.tensors"
    assert "model-00001-of-00002.safetensors: tensors 129, pinned 128 (+1)" in e.value.problem


def test_what_the_figures_settle():
    # OLMo 2's files are F32: the dtype and the index's total at 4 bytes an element.
    olmo = {r["key"]: r for r in cached("olmo2")["figures"]}
    assert olmo["dtypes"]["predicted"] == "F32" and olmo["bytes_by_dtype.F32"]["predicted"] == 29_194_469_376
    # Qwen3-0.6B writes its tied head a second time: 311 tensors, lm_head.weight among them.
    assert {r["key"]: r["predicted"] for r in cached("qwen3_0_6b")["figures"]}["named_tensors.lm_head.weight"] == "1 tensor, in model.safetensors"
    # gpt2's twelve masks, 4 MiB each: the payload is the parameters' 4 bytes plus theirs.
    assert 124_439_808 * 4 + 12 * 1024 * 1024 * 4 == HEADERS["gpt2"]["payload_bytes"]
    for repo, words in [("allenai/OLMo-2-1124-7B", "uncertain"), ("openai-community/gpt2", "unverified"), ("Qwen/Qwen3-0.6B", "not from a pinned header")]:
        assert words not in (ROOT / "atlas/checkpoints" / repo / "checkpoint.json").read_text()
    assert "uncertain" not in (ROOT / "atlas/families/olmo2.md").read_text().lower()


def test_a_figure_without_a_source_is_refused():
    with pytest.raises(AtlasError) as e:
        checkpoint_check("gemma3", lambda pinned: pinned.pop("figure_sources"))
    assert (e.value.field, e.value.problem) == ("figure_sources", "no source names the pinned figure shards")


def test_a_file_name_the_prediction_lacks_is_refused():
    def rename(pinned):
        pinned["safetensors"]["files"] = {"model-00001-of-00001.safetensors": {"bytes": 1}}
    with pytest.raises(AtlasError) as e:
        checkpoint_check("gemma3", rename)
    assert e.value.field == "safetensors.files.model-00001-of-00001.safetensors"


# --- the writer and the sharding rule, held to the real libraries ---------------------------------


def _tiny_tensors():
    import torch

    g = torch.Generator().manual_seed(0)
    return {
        "z.weight": torch.randn(3, 5, generator=g).to(torch.bfloat16),
        "a.scale": torch.rand(7, generator=g),
        "m.bias": torch.zeros(11, dtype=torch.float16),
        "b.blocks": torch.randint(0, 255, (4, 2, 16), dtype=torch.uint8, generator=g),
        "embed.weight": torch.randn(97, 13, generator=g).to(torch.bfloat16),
        "q.weight": torch.randn(128, 64, generator=g).to(torch.float8_e4m3fn),
    }


def _as_stored(tensors):
    from atlas.inputs.family import StoredTensor
    from atlas.inputs.dtypes import TORCH_TO_SAFETENSORS

    names = {"float8_e4m3fn": "F8_E4M3", "uint8": "U8"}
    out = []
    for name, t in tensors.items():
        dtype = str(t.dtype).removeprefix("torch.")
        out.append(StoredTensor(name, names.get(dtype) or TORCH_TO_SAFETENSORS[dtype], tuple(t.shape), "parameter"))
    return out


@pytest.mark.parametrize("metadata", [{"format": "pt"}, None])
def test_the_header_is_the_safetensors_library_s_byte_for_byte(tmp_path, metadata):
    from safetensors.torch import save_file

    from atlas.model.files import header_text

    tensors = _tiny_tensors()
    path = tmp_path / "model.safetensors"
    save_file(tensors, path, metadata=metadata)
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    assert header_text(_as_stored(tensors), metadata) == raw[8:8 + length].decode()
    assert len(raw) == 8 + length + sum(t.numel() * t.element_size() for t in tensors.values())


def test_header_bounds_hold_every_order():
    import itertools

    from atlas.model.files import _entries, header_bounds

    stored = _as_stored(_tiny_tensors())
    lo, hi = header_bounds(stored, {"format": "pt"})
    lengths = {len(_entries(list(order), {"format": "pt"})) for order in itertools.permutations(stored)}
    assert (min(lengths), max(lengths)) == (lo, hi)


def test_the_sharding_rule_is_huggingface_hub_s():
    import torch
    from huggingface_hub import split_torch_state_dict_into_shards

    from atlas.model.files import greedy_shards, shard_name

    g = torch.Generator().manual_seed(1)
    state = {f"layers.{i}.w": torch.zeros(int(torch.randint(1, 40, (1,), generator=g)), dtype=torch.bfloat16) for i in range(30)}
    split = split_torch_state_dict_into_shards(state, max_shard_size=100)
    shards = greedy_shards(_as_stored(state), 100)
    ours = {t.name: shard_name(i, len(shards)) for i, s in enumerate(shards) for t in s}
    assert ours == split.tensor_to_filename


# --- the build, from the command line --------------------------------------------------------------


def test_a_changed_header_length_fails_the_build_naming_file_and_field(project_copy):
    path = project_copy / "atlas/checkpoints/Qwen/Qwen3-0.6B/checkpoint.json"
    pinned = json.loads(path.read_text())
    pinned["safetensors"]["files"]["model.safetensors"]["header_bytes"] = 35_560
    path.write_text(json.dumps(pinned))
    out = project_copy / "site"
    result = run_build(project_copy, "--family", "qwen3_0_6b", "--out", str(out))
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: atlas/checkpoints/Qwen/Qwen3-0.6B/checkpoint.json: safetensors.files.model.safetensors.header_bytes: "
        "the model and config predict other figures than the checkpoint's headers: model.safetensors: header bytes 35,552, pinned 35,560 (-8)")
    assert "Traceback" not in result.stderr and not out.exists()


def test_an_index_copy_missing_a_tensor_fails_the_build_naming_it(project_copy):
    path = project_copy / "atlas/checkpoints/microsoft/Phi-3-mini-4k-instruct/model.safetensors.index.json"
    index = json.loads(path.read_text())
    del index["weight_map"]["model.layers.31.mlp.down_proj.weight"]
    path.write_text(json.dumps(index))
    result = run_build(project_copy, "--family", "phi3", "--out", str(project_copy / "site"))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: atlas/checkpoints/microsoft/Phi-3-mini-4k-instruct/model.safetensors.index.json: "
        "weight_map: model.layers.31.mlp.down_proj.weight: predicted, but the index lists no such tensor"
        "; the site in " + str(project_copy / "site") + " was left as it was"]
