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
