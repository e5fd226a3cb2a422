"""The strict safetensors header reader, on real files written here, good and broken."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from atlas.errors import AtlasError
from atlas.inputs.safetensors_headers import read_checkpoint, read_file


def write_raw(path: Path, header: dict | list | str, data: bytes = b"", declared_len: int | None = None) -> Path:
    body = header.encode() if isinstance(header, str) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body) if declared_len is None else declared_len) + body + data)
    return path


def test_reads_a_real_file(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"a": torch.zeros(3, 4, dtype=torch.bfloat16), "b": torch.zeros(5, dtype=torch.float32)}, str(path))
    tensors = {t.name: t for t in read_file(path)}
    assert (tensors["a"].dtype, tensors["a"].shape, tensors["b"].dtype, tensors["b"].shape) == ("BF16", (3, 4), "F32", (5,))
    assert tensors["a"].file == "model.safetensors"


def test_reads_fp8(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(4, 4).to(torch.float8_e4m3fn), "w_scale_inv": torch.ones(1, 1)}, str(path))
    assert {t.name: t.dtype for t in read_file(path)} == {"w": "F8_E4M3", "w_scale_inv": "F32"}


@pytest.mark.parametrize(
    "header, data, declared, field, words",
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, 1000, "header length", "runs past the end"),
        ({}, b"", 200 * 1024 * 1024, "header length", "over the 104,857,600-byte limit"),
        ([1, 2], b"", None, "header", "must be a JSON object, not list"),
        ("{not json", b"", None, "header", "not valid JSON"),
        ({"a": {"dtype": "F13", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "a", "unknown dtype 'F13'"),
        (
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
            b"\0" * 12, None, "b", "overlap a's",
        ),
        (
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}},
            b"\0" * 16, None, "b", "a gap of 4 bytes",
        ),
        ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, None, "a", "past the 8-byte data buffer"),
        ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "a", "F32 × [3] needs 12"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 12, None, "data buffer", "4 bytes after the last tensor"),
        ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "a", "non-negative integers"),
        ({"__metadata__": {"format": 1}}, b"", None, "__metadata__", "must map strings to strings"),
    ],
)
def test_rejects_broken_files_naming_file_and_field(tmp_path, header, data, declared, field, words):
    path = write_raw(tmp_path / "broken.safetensors", header, data, declared)
    with pytest.raises(AtlasError) as caught:
        read_file(path)
    error = caught.value
    assert error.where == str(path) and error.field == field
    assert words in str(error)
    assert str(error).startswith(f"{path}: {field}: ")


def test_rejects_a_file_too_short_for_its_length(tmp_path):
    path = tmp_path / "short.safetensors"
    path.write_bytes(b"\x01\x02")
    with pytest.raises(AtlasError, match="fewer than the 8 that give the header length"):
        read_file(path)


def test_rejects_duplicate_names(tmp_path):
    entry = '{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    path = write_raw(tmp_path / "dup.safetensors", '{"a": ' + entry + ', "a": ' + entry + "}", b"\0" * 4)
    with pytest.raises(AtlasError, match="duplicate key 'a'"):
        read_file(path)


def test_sharded_index_naming_a_missing_shard(tmp_path):
    save_file({"a": torch.zeros(2)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    index = {"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(AtlasError) as caught:
        read_checkpoint(tmp_path)
    assert "model-00002-of-00002.safetensors" in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "model.safetensors.index.json"))


def test_sharded_index_disagreeing_with_a_shard(tmp_path):
    save_file({"a": torch.zeros(2), "c": torch.zeros(1)}, str(tmp_path / "one.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "one.safetensors"}}))
    with pytest.raises(AtlasError, match=r"one.safetensors: c: the index puts it in no shard"):
        read_checkpoint(tmp_path)


def test_a_directory_without_safetensors(tmp_path):
    with pytest.raises(AtlasError, match="found 0 .safetensors files"):
        read_checkpoint(tmp_path)


# --- the index, checked as a pin checks it ---------------------------------------------------------


@pytest.mark.parametrize("index, field, words", [
    ([1, 2], None, "must hold a JSON object, not list"),
    ({"weight_map": ["a.safetensors"]}, "weight_map", "must map tensor names to shard file names"),
    ({"weight_map": {"a": "one.safetensors"}, "metadata": {"total_size": "16"}}, "metadata.total_size", "must be a whole number of bytes, not '16'"),
    ({"weight_map": {"a": "one.safetensors"}, "metadata": {"total_size": True}}, "metadata.total_size", "must be a whole number of bytes, not True"),
    ({"weight_map": {"a": "one.safetensors"}, "metadata": [16]}, "metadata", "must be a JSON object, not list"),
])
def test_an_index_of_the_wrong_shape_is_refused(tmp_path, index, field, words):
    save_file({"a": torch.zeros(2)}, str(tmp_path / "one.safetensors"))
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    with pytest.raises(AtlasError) as caught:
        read_checkpoint(tmp_path)
    assert str(caught.value) == f"{path}: {field + ': ' if field else ''}{words}"


# --- one line: a name holding a newline stays on the error's line -----------------------------------


def test_a_tensor_name_with_a_newline_is_escaped_in_the_error(tmp_path):
    name = "a\nerror: all is well\x1b[2J"
    path = write_raw(tmp_path / "m.safetensors", {name: {"dtype": "F13", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(AtlasError) as caught:
        read_file(path)
    assert str(caught.value) == f"{path}: a\\nerror: all is well\\u001b[2J: unknown dtype 'F13'"


# --- linear in the number of names ----------------------------------------------------------------

KIMI_K2_TENSORS = 139_644  # Kimi K2's index: the largest the README's --weights example reads


def write_many(path: Path, count: int) -> list[str]:
    names = [f"model.layers.{i // 1536}.mlp.experts.{(i // 3) % 512}.w{i % 3}.weight" for i in range(count)]
    header = {n: {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]} for i, n in enumerate(names)}
    write_raw(path, header, bytes(2 * count))
    return names


def test_a_header_of_kimi_k2s_number_of_names_is_read_whole(tmp_path):
    # How long it takes is benchmarks/read_headers.py's to measure (README gives the figure); here,
    # that a real file of that many names reads at all, every name in order.
    names = write_many(tmp_path / "model.safetensors", KIMI_K2_TENSORS)
    tensors = read_file(tmp_path / "model.safetensors")
    assert [t.name for t in tensors] == names and {t.dtype for t in tensors} == {"BF16"}


class CountedKey(str):
    """A key that counts how often it is compared: a quadratic duplicate check compares each with each."""
    comparisons = 0

    def __eq__(self, other):
        CountedKey.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_duplicate_check_compares_each_name_a_bounded_number_of_times():
    from atlas.inputs.safetensors_headers import object_without_duplicates

    # Counted, not timed: keys.count(k) per key made 2,000 names 4,000,000 comparisons; a set makes
    # about one per name (only where two hashes collide), whatever the machine's speed.
    pairs = [(CountedKey(f"t{i}"), i) for i in range(2_000)]
    CountedKey.comparisons = 0
    assert len(object_without_duplicates(pairs)) == 2_000
    assert CountedKey.comparisons <= 2 * len(pairs)
    with pytest.raises(ValueError, match="duplicate key 't5'"):
        object_without_duplicates(pairs[:6] + [(CountedKey("t5"), 0)])


def lines_run(function, *args) -> int:
    """How many lines of Python the reader runs: a loop inside a loop shows as a count that grows
    with the square of the names; counted, so the machine's speed does not enter."""
    import sys

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line" and frame.f_code.co_filename.endswith("safetensors_headers.py"):
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        function(*args)
    finally:
        sys.settrace(None)
    return count


def test_the_reader_runs_the_same_lines_per_name_whatever_their_number(tmp_path):
    from atlas.inputs import safetensors_headers

    counts = []
    for names in (1_000, 2_000, 3_000):
        folder = tmp_path / str(names)
        folder.mkdir()
        write_many(folder / "model.safetensors", names)
        safetensors_headers._last_read = None
        counts.append(lines_run(read_checkpoint, folder))
    # each thousand names more costs the same lines as the thousand before (a loop over the names
    # inside a loop over the names would cost more each time: a million lines more per thousand)
    assert counts[0] < counts[1] < counts[2] and abs((counts[2] - counts[1]) - (counts[1] - counts[0])) <= 10, counts


# --- read once per build --------------------------------------------------------------------------


def test_a_folder_asked_for_twice_is_read_once_unless_a_file_changed(tmp_path, monkeypatch):
    from atlas.inputs import safetensors_headers

    save_file({"a": torch.zeros(2), "b": torch.zeros(3)}, str(tmp_path / "model.safetensors"))
    reads = []
    real = safetensors_headers.read_file
    monkeypatch.setattr(safetensors_headers, "read_file", lambda path: reads.append(path) or real(path))
    monkeypatch.setattr(safetensors_headers, "_last_read", None)
    first = read_checkpoint(tmp_path)
    second = read_checkpoint(tmp_path)  # as the build asks for it: preflight, then when it collects
    assert first == second and len(reads) == 1
    save_file({"a": torch.zeros(2)}, str(tmp_path / "model.safetensors"))  # a new file: read again
    assert [t.name for t in read_checkpoint(tmp_path)[0]] == ["a"] and len(reads) == 2


def test_a_build_with_weights_reads_each_file_once(tmp_path):
    # A build asks for the folder in its preflight and again when it collects the family; the second
    # is answered from the first. Counted in a build process of its own, the reader's read_file wrapped.
    import subprocess
    import sys

    from tests.conftest import ROOT

    save_file({"wte.weight": torch.zeros(4, 4)}, str(tmp_path / "model.safetensors"))
    script = (
        "import sys; from atlas.inputs import safetensors_headers as sh; calls = []; real = sh.read_file\n"
        "sh.read_file = lambda p: calls.append(p) or real(p)\n"
        "import build\n"
        "try:\n    build.build(['gpt2'], __import__('pathlib').Path(sys.argv[1]) / 'site', __import__('pathlib').Path(sys.argv[1]))\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
        "print('reads', len(calls))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = result.stdout.splitlines()
    # the file holds one tensor of a made-up shape: the build stops where it compares, after both asks
    assert lines == [f"AtlasError {tmp_path}/model.safetensors: wte.weight: shape [4, 4], predicted [50257, 768]", "reads 1"], result.stderr
