"""`build.py pin` against a local server that plays the Hub for a few tiny made-up repositories.

The server answers what huggingface_hub asks of the Hub: HEAD and GET on
/<org>/<repo>/resolve/<revision>/<file>, with X-Repo-Commit, ETag and Content-Length, ranges answered
206, and a missing repository or file answered 404 with the X-Error-Code the client reads. The
safetensors files are written here by the safetensors library; the figures the command pins are
checked against the tensors written, counted here by hand.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_build

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(http.server.BaseHTTPRequestHandler):
    repos: dict[str, dict[str, bytes]] = {}

    def log_message(self, *args):
        pass

    def _file(self):
        m = re.match(r"^/(?:api/models/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", self.path.split("?")[0])
        if m is None or m.group(1) not in self.repos:
            return None, "RepoNotFound"
        data = self.repos[m.group(1)].get(m.group(3))
        return data, None if data is not None else "EntryNotFound"

    def _answer(self, body: bool):
        data, error = self._file()
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", error)
            self.send_header("X-Error-Message", error)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end, status = 0, len(data) - 1, 200
        wanted = self.headers.get("Range")
        if wanted:
            a, b = wanted.removeprefix("bytes=").split("-")
            start, end, status = int(a), min(int(b), len(data) - 1), 206
        part = data[start:end + 1]
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(len(part) if body or status == 206 else len(data)))
        self.end_headers()
        if body:
            self.wfile.write(part)

    def do_HEAD(self):
        self._answer(False)

    def do_GET(self):
        self._answer(True)


def _safetensors(tensors) -> bytes:
    from safetensors.torch import save

    return save(tensors, metadata={"format": "pt"})


def _tiny_llama():
    """A real two-block Llama, its config.json and model.safetensors as save_pretrained writes them."""
    import tempfile

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        return {name: (Path(d) / name).read_bytes() for name in ("config.json", "model.safetensors")}, model


@pytest.fixture(scope="module")
def hub():
    import torch

    files, model = _tiny_llama()
    FakeHub.repos = {"tiny/llama": files}
    # Sharded, with an index: two files of BF16 weights.
    a = {"x.weight": torch.zeros(4, 8, dtype=torch.bfloat16), "x.bias": torch.zeros(4, dtype=torch.bfloat16)}
    b = {"y.weight": torch.zeros(3, 5, dtype=torch.bfloat16)}
    index = {"metadata": {"total_size": 2 * (32 + 4 + 15)},
             "weight_map": {**{k: "model-00001-of-00002.safetensors" for k in a}, **{k: "model-00002-of-00002.safetensors" for k in b}}}
    FakeHub.repos["tiny/sharded"] = {"config.json": b'{"model_type": "made-up"}',
                                     "model.safetensors.index.json": json.dumps(index, indent=2).encode(),
                                     "model-00001-of-00002.safetensors": _safetensors(a), "model-00002-of-00002.safetensors": _safetensors(b)}
    # FP8 weights with their F32 block scales.
    fp8 = {"q.weight": torch.zeros(256, 128).to(torch.float8_e4m3fn), "q.weight_scale_inv": torch.ones(2, 1),
           "norm.weight": torch.ones(128, dtype=torch.bfloat16)}
    FakeHub.repos["tiny/fp8"] = {"config.json": b"{}", "model.safetensors": _safetensors(fp8)}
    # A header cut short: its length says more bytes than the file holds.
    whole = _safetensors({"w": torch.zeros(2, 2)})
    FakeHub.repos["tiny/truncated"] = {"config.json": b"{}", "model.safetensors": whole[:8] + whole[8:30]}
    # A repository with a config and no weights.
    FakeHub.repos["tiny/no-weights"] = {"config.json": b"{}"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", model
    server.shutdown()


def pin(project: Path, endpoint: str, *args: str) -> subprocess.CompletedProcess:
    import tempfile

    # get_safetensors_metadata caches the index it reads: in a folder of its own (removed after), never the
    # user's cache or the project
    with tempfile.TemporaryDirectory(prefix="atlas-pin-test-") as home:
        env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": home, "HF_HUB_DISABLE_TELEMETRY": "1",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        env.pop("HF_HUB_OFFLINE", None)
        return subprocess.run([sys.executable, "build.py", "pin", *args], cwd=project, capture_output=True, text=True, timeout=300, env=env)


def test_a_single_file_repository_is_pinned_and_the_folder_builds(hub, project_copy):
    endpoint, model = hub
    result = pin(project_copy, endpoint, "tiny/llama")
    assert result.returncode == 0, result.stderr
    folder = project_copy / "atlas/checkpoints/tiny/llama"
    assert (folder / "config.json").read_bytes() == FakeHub.repos["tiny/llama"]["config.json"]
    pinned = json.loads((folder / "checkpoint.json").read_text())
    assert pinned["revision"] == COMMIT
    state = model.state_dict()
    payload = sum(t.numel() * 2 for t in state.values())  # every tensor BF16, none tied
    size = len(FakeHub.repos["tiny/llama"]["model.safetensors"])
    figures = pinned["safetensors"]
    assert figures["tensors"] == len(state) and figures["tensors_by_dtype"] == {"BF16": len(state)}
    assert figures["payload_bytes"] == payload and figures["shards"] == 1
    assert figures["files"] == {"model.safetensors": {"tensors": len(state), "header_bytes": size - 8 - payload, "bytes": size}}
    listed = json.loads((folder / "headers.json").read_text())["tensors"]
    assert sorted(t["name"] for t in listed) == sorted(state)
    # A family module pointing at the folder builds, every figure pinned checked against the prediction.
    (project_copy / "atlas/families/tiny_pinned.py").write_text(
        '"""A tiny Llama pinned from the fake Hub."""\n\nfrom atlas.families.llama import FAMILY as LLAMA\n\n'
        'FAMILY = LLAMA.but(title="Tiny pinned", checkpoint="tiny/llama")\n')
    (project_copy / "atlas/families/tiny_pinned.md").write_text("# Before you run it\n\nNothing new.\n")
    out = project_copy / "site"
    built = run_build(project_copy, "--family", "tiny_pinned", "--out", str(out))
    assert built.returncode == 0, built.stderr
    facts = json.loads((out / "tiny_pinned/facts.json").read_text())
    rows = {r["key"]: r for r in facts["checkpoint_check"]["figures"]}
    for key in ("tensors", "payload_bytes", "shards", "files.model.safetensors.header_bytes", "files.model.safetensors.bytes", "file_bytes"):
        assert rows[key]["checked"] and rows[key]["predicted"] == rows[key]["pinned"], key


def test_a_sharded_repository_is_pinned_with_its_index(hub, tmp_path):
    endpoint, _ = hub
    result = pin(ROOT, endpoint, "tiny/sharded", "--out", str(tmp_path / "sharded"))
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "sharded/checkpoint.json").read_text())["safetensors"]
    assert figures["tensors"] == 3 and figures["shards"] == 2
    assert figures["payload_bytes"] == figures["index_total_size"] == 2 * (32 + 4 + 15)
    assert figures["index_total_size_counts"] == "payload bytes"
    assert {n: f["tensors"] for n, f in figures["files"].items()} == {"model-00001-of-00002.safetensors": 2, "model-00002-of-00002.safetensors": 1}
    assert figures["index_file_bytes"] == len(FakeHub.repos["tiny/sharded"]["model.safetensors.index.json"])
    assert (tmp_path / "sharded/model.safetensors.index.json").read_bytes() == FakeHub.repos["tiny/sharded"]["model.safetensors.index.json"]


def test_fp8_weights_and_their_scales_are_counted_by_dtype(hub, tmp_path):
    endpoint, _ = hub
    result = pin(ROOT, endpoint, "tiny/fp8", "--out", str(tmp_path / "fp8"))
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "fp8/checkpoint.json").read_text())["safetensors"]
    assert figures["tensors_by_dtype"] == {"BF16": 1, "F32": 1, "F8_E4M3": 1}
    assert figures["bytes_by_dtype"] == {"BF16": 128 * 2, "F32": 2 * 4, "F8_E4M3": 256 * 128}


@pytest.mark.parametrize("repo, message", [
    ("tiny/missing", "/tiny/missing: main: not found (RepositoryNotFoundError); nothing was written"),
    ("tiny/no-weights", "/tiny/no-weights: model.safetensors: neither model.safetensors nor model.safetensors.index.json is in the repository; nothing was written"),
    ("tiny/truncated", "/tiny/truncated: safetensors header: "),
])
def test_a_missing_repository_or_a_broken_header_is_one_line(hub, tmp_path, repo, message):
    endpoint, _ = hub
    result = pin(ROOT, endpoint, repo, "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {endpoint}") and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


def test_offline_is_one_line(tmp_path):
    result = pin(ROOT, "http://127.0.0.1:9", "tiny/llama", "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.strip() == "error: the Hub is not reachable (http://127.0.0.1:9: ConnectError); nothing was written"
    assert not (tmp_path / "out").exists()
