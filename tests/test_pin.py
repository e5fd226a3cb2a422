"""`build.py pin` against a local server that plays the Hub, for tiny made-up repositories and hostile ones.

The server answers what the Hub answers: GET on /<org>/<repo>/resolve/<revision>/<file>, with
X-Repo-Commit, ranges answered 206 with Content-Range, and a missing repository or file answered 404
with the X-Error-Code the Hub sends. The safetensors files of the good repositories are written here
by the safetensors library; the figures the command pins are checked against the tensors written,
counted here by hand. The hostile repositories answer as a broken or malicious server would; each
ends in the one line given here, the folder it would have written left as it was, and the server
counts the bytes it sent, so that a body read past its cap shows.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from atlas.build import pin as pin_module
from tests.conftest import ROOT, run_build, snapshot

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
GIB = 1 << 30
MIB = 1 << 20


class FakeHub(http.server.BaseHTTPRequestHandler):
    # repository -> file -> its bytes, or a function that answers the request itself
    repos: dict[str, dict] = {}
    sent: Counter = Counter()  # body bytes written, by repository
    authorizations: list = []  # (path, Authorization header) of every request

    def log_message(self, *args):
        pass

    def _route(self):
        path = re.sub(r"^https?://[^/]+", "", self.path)  # a proxy is asked by full URL
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path.split("?")[0])
        if m is None or m.group(1) not in self.repos:
            return None, None, "RepoNotFound"
        return m.group(1), self.repos[m.group(1)].get(m.group(3)), "EntryNotFound"

    def do_GET(self):
        FakeHub.authorizations.append((self.path, self.headers.get("Authorization")))
        repo, data, error = self._route()
        if callable(data):
            return data(self, repo)
        if data is None:
            return self.answer(404, {"X-Error-Code": error, "X-Error-Message": error})
        start, end, status = 0, len(data) - 1, 200
        wanted = self.headers.get("Range")
        if wanted:
            a, b = wanted.removeprefix("bytes=").split("-")
            start, end, status = int(a), min(int(b), len(data) - 1), 206
        part = data[start:end + 1]
        extra = {"ETag": '"' + hashlib.sha256(data).hexdigest() + '"', "Accept-Ranges": "bytes"}
        if status == 206:
            extra["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        self.answer(status, extra, part, repo)

    def answer(self, status: int, headers: dict, body: bytes = b"", repo: str | None = None, commit: str | None = COMMIT):
        self.send_response(status)
        if commit is not None:
            self.send_header("X-Repo-Commit", commit)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.write(body, repo)

    def write(self, body: bytes, repo: str | None) -> bool:
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            return False
        FakeHub.sent[repo] += len(body)
        return True


# --- hostile answers ------------------------------------------------------------------------------


def status(code: int):
    return lambda h, repo: h.answer(code, {})


def drop(h, repo):
    h.close_connection = True
    h.request.shutdown(socket.SHUT_RDWR)


def drop_after(sent: int, declared: int):
    def answer(h, repo):
        h.answer(200, {"Content-Length": str(declared)}, b"{" + b" " * (sent - 1), repo)
        h.close_connection = True
        h.request.shutdown(socket.SHUT_RDWR)
    return answer


def redirect(location: str | None, commit: str | None = COMMIT):
    """A 302 as the Hub sends for a file in LFS, without the ETag the Hub adds."""
    return lambda h, repo: h.answer(302, {"Location": location} if location else {}, commit=commit)


def endless(status_code: int, declared: int | None, headers: dict | None = None):
    """``declared`` bytes of zeros (or without a length, until the client goes), made as they are sent."""
    def answer(h, repo):
        h.send_response(status_code)
        h.send_header("X-Repo-Commit", COMMIT)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        if declared is not None:
            h.send_header("Content-Length", str(declared))
        h.end_headers()
        h.close_connection = True
        chunk = bytes(256 * 1024)
        for _ in range((declared or 64 * GIB) // len(chunk)):
            if not h.write(chunk, repo):
                return
    return answer


def trickle(during: str):
    """One byte every half second, for ever: of the status line, or of a body announced as 1,000 bytes."""
    def answer(h, repo):
        h.close_connection = True
        if during == "body":
            h.send_response(200)
            h.send_header("X-Repo-Commit", COMMIT)
            h.send_header("Content-Length", "1000")
            h.end_headers()
        for _ in range(600):
            if not h.write(b"H" if during == "status" else b" ", repo):
                return
            time.sleep(0.5)
    return answer


def range_then_more(data: bytes):
    """Ranges answered 206 with the right Content-Range, but the second one with far more bytes than asked."""
    def answer(h, repo):
        a, b = h.headers["Range"].removeprefix("bytes=").split("-")
        start, end = int(a), min(int(b), len(data) - 1)
        if start == 0:
            return h.answer(206, {"Content-Range": f"bytes {start}-{end}/{len(data)}"}, data[start:end + 1], repo)
        endless(206, 64 * MIB, {"Content-Range": f"bytes {start}-{end}/{len(data)}"})(h, repo)
    return answer


def raw_safetensors(header, data: bytes = b"", declared: int | None = None) -> bytes:
    body = header.encode() if isinstance(header, str) else json.dumps(header).encode()
    return struct.pack("<Q", len(body) if declared is None else declared) + body + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


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


SHARD_1, SHARD_2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def sharded(weight_map: dict | list | str, total_size=None, **shards) -> dict:
    index = {"weight_map": weight_map} if total_size is None else {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    return {"config.json": b"{}", "model.safetensors.index.json": json.dumps(index).encode(), **shards}


# A header longer than the first range read (100,000 bytes), so that its rest is asked for: 50,000 bytes.
LONG_HEADER = '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "pad": "' + "x" * (149_992 - 72) + '"}'
assert len(LONG_HEADER) == 149_992


def hostile_repos() -> dict[str, dict]:
    f32 = entry("F32", [2], 0, 8)
    ok = raw_safetensors({"a": f32}, bytes(8))
    return {
        "bad/status-500": {"config.json": status(500)},
        "bad/gated": {"config.json": lambda h, repo: h.answer(401, {"X-Error-Code": "GatedRepo"})},
        "bad/dropped": {"config.json": drop},
        "bad/dropped-mid-body": {"config.json": drop_after(10, 100)},
        "bad/redirect-nowhere": {"config.json": redirect(None)},
        "bad/redirect-loop": {"config.json": redirect("/bad/redirect-loop/resolve/main/config.json")},
        "bad/redirect-file": {"config.json": redirect("file:///etc/passwd")},
        "bad/redirect-bad-port": {"config.json": redirect("http://127.0.0.1:port/x")},
        "bad/commit": {"config.json": lambda h, repo: h.answer(200, {}, b"{}", repo, commit="<img src=x onerror=alert(1)>../../x")},
        "bad/no-commit": {"config.json": lambda h, repo: h.answer(200, {}, b"{}", repo, commit=None)},
        "bad/config-list": {"config.json": b"[1, 2]", "model.safetensors": ok},
        "bad/config-1gib": {"config.json": endless(200, GIB)},
        "bad/config-endless": {"config.json": endless(200, None)},
        "bad/trickle-body": {"config.json": trickle("body")},
        "bad/trickle-status": {"config.json": trickle("status")},
        "bad/range-ignored": {"config.json": b"{}", "model.safetensors": endless(200, GIB)},
        "bad/range-then-more": {"config.json": b"{}", "model.safetensors": range_then_more(raw_safetensors(LONG_HEADER, bytes(8)))},
        "bad/no-weights": {"config.json": b"{}"},
        "bad/dtype": {"config.json": b"{}", "model.safetensors": raw_safetensors({"a": entry("F13", [2], 0, 8)}, bytes(8))},
        "bad/shape": {"config.json": b"{}", "model.safetensors": raw_safetensors({"a": entry("F32", [2.5], 0, 8)}, bytes(8))},
        "bad/negative": {"config.json": b"{}", "model.safetensors": raw_safetensors({"a": entry("F32", [2], -8, 0)}, bytes(8))},
        "bad/overlap": {"config.json": b"{}", "model.safetensors": raw_safetensors(
            {"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, bytes(12))},
        "bad/duplicate": {"config.json": b"{}", "model.safetensors": raw_safetensors(
            '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
            bytes(4))},
        "bad/huge-tensor": {"config.json": b"{}", "model.safetensors": raw_safetensors(
            {"a": entry("F32", [25_000_000_000], 0, 100_000_000_000)}, bytes(8))},
        "bad/header-over-limit": {"config.json": b"{}", "model.safetensors": raw_safetensors({}, bytes(8), declared=200 * MIB)},
        "bad/newline-name": {"config.json": b"{}", "model.safetensors": raw_safetensors(
            {"a\nerror: all is well": entry("F13", [2], 0, 8)}, bytes(8))},
        "bad/index-list": sharded(["a"]) | {"model.safetensors.index.json": b'["a", "b"]'},
        "bad/total-size-string": sharded({"a": SHARD_1}, "8", **{SHARD_1: ok}),
        "bad/shard-escapes": sharded({"a": "../x.safetensors"}, **{SHARD_1: ok}),
        "bad/shard-absolute": sharded({"a": "/etc/passwd"}, **{SHARD_1: ok}),
        "bad/shard-missing": sharded({"a": SHARD_1, "b": SHARD_2}, **{SHARD_1: ok}),
    }


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up mid-answer is what these tests make happen; its stderr is the pin's


@pytest.fixture(scope="module")
def hub():
    import torch

    files, model = _tiny_llama()
    FakeHub.repos = {"tiny/llama": files}
    # Sharded, with an index: two files of BF16 weights.
    a = {"x.weight": torch.zeros(4, 8, dtype=torch.bfloat16), "x.bias": torch.zeros(4, dtype=torch.bfloat16)}
    b = {"y.weight": torch.zeros(3, 5, dtype=torch.bfloat16)}
    index = {"metadata": {"total_size": 2 * (32 + 4 + 15)},
             "weight_map": {**{k: SHARD_1 for k in a}, **{k: SHARD_2 for k in b}}}
    FakeHub.repos["tiny/sharded"] = {"config.json": b'{"model_type": "made-up"}',
                                     "model.safetensors.index.json": json.dumps(index, indent=2).encode(),
                                     SHARD_1: _safetensors(a), SHARD_2: _safetensors(b)}
    # FP8 weights with their F32 block scales.
    fp8 = {"q.weight": torch.zeros(256, 128).to(torch.float8_e4m3fn), "q.weight_scale_inv": torch.ones(2, 1),
           "norm.weight": torch.ones(128, dtype=torch.bfloat16)}
    FakeHub.repos["tiny/fp8"] = {"config.json": b"{}", "model.safetensors": _safetensors(fp8)}
    # A header cut short: its length says more bytes than the file holds.
    whole = _safetensors({"w": torch.zeros(2, 2)})
    FakeHub.repos["tiny/truncated"] = {"config.json": b"{}", "model.safetensors": whole[:8] + whole[8:30]}
    # The llama again, every file behind a redirect without an ETag, as the Hub sends LFS files to its CDN.
    FakeHub.repos["tiny/redirected"] = {name: redirect(f"/tiny/llama/resolve/{COMMIT}/{name}") for name in files}
    FakeHub.repos.update(hostile_repos())
    server = QuietServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", model
    server.shutdown()


def pin(project: Path, endpoint: str, *args: str, home: Path | None = None, limit_file_bytes: int | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """`python build.py pin` in a process of its own, HF_HOME a folder of the test's."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="atlas-pin-test-") as scratch:
        environment = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(home or scratch), **(env or {})}
        for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            if name not in (env or {}):
                environment.pop(name, None)

        def limited():
            if limit_file_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

        return subprocess.run([sys.executable, "build.py", "pin", *args], cwd=project, capture_output=True, text=True,
                              timeout=300, env=environment, preexec_fn=limited)


def pin_here(capsys, *args: str) -> tuple[int, str, str]:
    """`build.py pin` run in this process (its main, as build.py calls it): exit code, stdout, stderr."""
    code = pin_module.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def no_proxy_or_token(monkeypatch):
    for name in ("HF_TOKEN", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def pinned_folder(hub, tmp_path, capsys, no_proxy_or_token) -> Path:
    """A folder a pin of tiny/llama wrote, in a parent of its own, for the pins that must leave it as it was."""
    endpoint, _ = hub
    out = tmp_path / "parent" / "llama"
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(out))
    assert code == 0, err
    return out


def test_a_single_file_repository_is_pinned_and_the_folder_builds(hub, project_copy, tmp_path):
    endpoint, model = hub
    home = tmp_path / "hf-home"
    home.mkdir()
    result = pin(project_copy, endpoint, "tiny/llama", home=home)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout.startswith(f"pinned tiny/llama at {COMMIT} into ")
    assert list(home.iterdir()) == []  # nothing in the user's Hugging Face cache
    folder = project_copy / "atlas/checkpoints/tiny/llama"
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.json", "config.json", "headers.json"]
    assert [p.name for p in folder.parent.iterdir()] == ["llama"]  # nothing left beside it
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


def test_a_sharded_repository_is_pinned_with_its_index(hub, tmp_path, capsys, no_proxy_or_token):
    endpoint, _ = hub
    code, _, err = pin_here(capsys, "tiny/sharded", "--endpoint", endpoint, "--out", str(tmp_path / "sharded"))
    assert code == 0, err
    figures = json.loads((tmp_path / "sharded/checkpoint.json").read_text())["safetensors"]
    assert figures["tensors"] == 3 and figures["shards"] == 2
    assert figures["payload_bytes"] == figures["index_total_size"] == 2 * (32 + 4 + 15)
    assert figures["index_total_size_counts"] == "payload bytes"
    assert {n: f["tensors"] for n, f in figures["files"].items()} == {SHARD_1: 2, SHARD_2: 1}
    assert figures["index_file_bytes"] == len(FakeHub.repos["tiny/sharded"]["model.safetensors.index.json"])
    assert (tmp_path / "sharded/model.safetensors.index.json").read_bytes() == FakeHub.repos["tiny/sharded"]["model.safetensors.index.json"]


def test_fp8_weights_and_their_scales_are_counted_by_dtype(hub, tmp_path, capsys, no_proxy_or_token):
    endpoint, _ = hub
    code, _, err = pin_here(capsys, "tiny/fp8", "--endpoint", endpoint, "--out", str(tmp_path / "fp8"))
    assert code == 0, err
    figures = json.loads((tmp_path / "fp8/checkpoint.json").read_text())["safetensors"]
    assert figures["tensors_by_dtype"] == {"BF16": 1, "F32": 1, "F8_E4M3": 1}
    assert figures["bytes_by_dtype"] == {"BF16": 128 * 2, "F32": 2 * 4, "F8_E4M3": 256 * 128}


def test_files_behind_a_redirect_without_an_etag_are_pinned(hub, tmp_path, capsys, no_proxy_or_token):
    endpoint, _ = hub
    code, _, err = pin_here(capsys, "tiny/redirected", "--endpoint", endpoint, "--out", str(tmp_path / "r"))
    assert code == 0, err
    pinned = json.loads((tmp_path / "r/checkpoint.json").read_text())
    assert pinned["repo"] == "tiny/redirected" and pinned["revision"] == COMMIT
    assert pinned["safetensors"]["files"]["model.safetensors"]["bytes"] == len(FakeHub.repos["tiny/llama"]["model.safetensors"])


# --- every hostile answer: one line, the old folder kept, no body read past its cap -------------------

R = "{e}/{repo}/resolve/main/config.json"  # the first request, for the revision asked (main)
C = "{e}/{repo}/resolve/" + COMMIT + "/"  # every later one, at the commit the first named
ONE_CHUNK = 256 * 1024

HOSTILE = [
    ("bad/status-500", R + ": the server answered 500 Internal Server Error", 0),
    ("bad/gated", R + ": refused (401 GatedRepo): a gated or private repository needs a token; no token was sent "
                      "(HF_TOKEN goes only to https://huggingface.co unless --send-token)", 0),
    ("bad/dropped", R + ": the server closed the connection without an answer", 0),
    ("bad/dropped-mid-body", R + ": body: the connection closed after 10 of 100 bytes", 10),
    ("bad/redirect-nowhere", R + ": Location: a 302 redirect that names no address", 0),
    ("bad/redirect-loop", R + ": Location: more than 5 redirects", 0),
    ("bad/redirect-file", R + ": Location: redirected to 'file:///etc/passwd', not an http:// or https:// address", 0),
    ("bad/redirect-bad-port", R + ": Location: redirected to 'http://127.0.0.1:port/x', not an http:// or https:// address", 0),
    ("bad/commit", R + ": X-Repo-Commit: '<img src=x onerror=alert(1)>../../x' is not a commit (40 hex digits)", 2),
    ("bad/no-commit", R + ": X-Repo-Commit: missing: the server did not say which commit it served, so there is none to pin", 2),
    ("bad/config-list", R + ": must hold a JSON object", None),
    ("bad/config-1gib", R + ": Content-Length: 1,073,741,824 bytes is over the 16,777,216 bytes it can be; left unread", 64 * MIB),
    ("bad/config-endless", R + ": body: more than the 16,777,216 bytes it can be; the rest left unread", 16 * MIB + 64 * MIB),
    ("bad/range-ignored", C + "model.safetensors: Range: the server ignored it and began sending the whole file (200, not 206); "
                              "a pin reads headers only, so the body was left unread", 64 * MIB),
    ("bad/range-then-more", C + "model.safetensors: Content-Length: 67,108,864 bytes is over the 50,000 bytes it can be; left unread",
     100_000 + 64 * MIB),
    ("bad/no-weights", C + "model.safetensors: not found, nor model.safetensors.index.json: the repository holds no safetensors weights to pin",
     None),
    ("bad/dtype", C + "model.safetensors: a: unknown dtype 'F13'", None),
    ("bad/shape", C + "model.safetensors: a: shape must be a list of non-negative integers, not [2.5]", None),
    ("bad/negative", C + "model.safetensors: a: data_offsets must be [begin, end] with 0 <= begin <= end, not [-8, 0]", None),
    ("bad/overlap", C + "model.safetensors: b: data_offsets overlap a's (starts at 4, before 8)", None),
    ("bad/duplicate", C + "model.safetensors: header: not valid JSON: duplicate key 'a'", None),
    ("bad/huge-tensor", C + "model.safetensors: a: data_offsets end at 100,000,000,000, past the 8-byte data buffer", None),
    ("bad/header-over-limit", C + "model.safetensors: header length: 209,715,200 bytes is over the 104,857,600-byte limit", None),
    ("bad/newline-name", C + "model.safetensors: a\\nerror: all is well: unknown dtype 'F13'", None),
    ("bad/index-list", C + "model.safetensors.index.json: must hold a JSON object, not list", None),
    ("bad/total-size-string", C + "model.safetensors.index.json: metadata.total_size: must be a whole number of bytes, not '8'", None),
    ("bad/shard-escapes", C + "model.safetensors.index.json: weight_map['a']: '../x.safetensors' is not a plain .safetensors file name "
                              "in the checkpoint folder", None),
    ("bad/shard-absolute", C + "model.safetensors.index.json: weight_map['a']: '/etc/passwd' is not a plain .safetensors file name "
                               "in the checkpoint folder", None),
    ("bad/shard-missing", C + SHARD_2 + ": not found (404 EntryNotFound)", None),
    ("tiny/truncated", C + "model.safetensors: header length: {declared:,} bytes runs past the end of the 30-byte file", None),
    ("tiny/missing", R + ": not found (404 RepoNotFound)", None),
]


@pytest.mark.parametrize("repo, expected, most_sent", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_answer_is_one_line_and_the_folder_is_kept(hub, pinned_folder, capsys, repo, expected, most_sent):
    endpoint, _ = hub
    before = snapshot(pinned_folder.parent)
    FakeHub.sent[repo] = 0
    code, out, err = pin_here(capsys, repo, "--endpoint", endpoint, "--out", str(pinned_folder))
    declared = struct.unpack("<Q", FakeHub.repos["tiny/truncated"]["model.safetensors"][:8])[0]
    assert (code, out, err) == (1, "", "error: " + expected.format(e=endpoint, repo=repo, declared=declared) + "; nothing was written\n")
    assert snapshot(pinned_folder.parent) == before and sorted(p.name for p in pinned_folder.parent.iterdir()) == ["llama"]
    if most_sent is not None:  # what the server got to send before the pin hung up: never the body past its cap
        assert FakeHub.sent[repo] <= most_sent, FakeHub.sent[repo]


@pytest.mark.parametrize("during", ["status", "body"])
def test_a_server_that_trickles_is_given_up_at_the_deadline(hub, pinned_folder, capsys, during):
    # The server sends a byte every half second for as long as it is listened to: only the pin's own
    # deadline can end the request, however fast or slow the machine.
    endpoint, _ = hub
    before = snapshot(pinned_folder.parent)
    repo = f"bad/trickle-{during}"
    code, out, err = pin_here(capsys, repo, "--endpoint", endpoint, "--out", str(pinned_folder), "--timeout", "1.5")
    assert (code, out) == (1, "")
    assert err == f"error: {endpoint}/{repo}/resolve/main/config.json: no complete answer within the 1.5 s a pin may take (--timeout); nothing was written\n"
    assert snapshot(pinned_folder.parent) == before


def test_a_revision_asked_for_by_commit_must_be_the_one_served(hub, pinned_folder, capsys):
    endpoint, _ = hub
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(pinned_folder), "--revision", OTHER_COMMIT)
    url = f"{endpoint}/tiny/llama/resolve/{OTHER_COMMIT}/config.json"
    assert (code, err) == (1, f"error: {url}: X-Repo-Commit: the server served commit {COMMIT}, not the {OTHER_COMMIT} asked for; "
                              "nothing was written\n")


def test_offline_is_one_line(tmp_path, capsys, no_proxy_or_token):
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "out"))
    assert (code, err) == (1, "error: the Hub is not reachable (http://127.0.0.1:9: ConnectionRefusedError); nothing was written\n")
    assert not (tmp_path / "out").exists()


# --- arguments refused before any request ---------------------------------------------------------

USAGE = [
    (["../x"], "'../x' is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting with a letter or digit)"),
    (["tiny/.."], "'tiny/..' is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting with a letter or digit)"),
    (["my org/repo"], "'my org/repo' is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting with a letter or digit)"),
    (["tiny/llama\nerror: x"], "'tiny/llama\\nerror: x' is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting "
                               "with a letter or digit)"),
    (["llama"], "'llama' is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting with a letter or digit)"),
    (["tiny/llama", "--endpoint", "file:///etc"], "--endpoint: 'file:///etc' is not an http:// or https:// address"),
    (["tiny/llama", "--endpoint", "ftp://example.org"], "--endpoint: 'ftp://example.org' is not an http:// or https:// address"),
    (["tiny/llama", "--endpoint", "not a url"], "--endpoint: 'not a url' is not an http:// or https:// address"),
    (["tiny/llama", "--endpoint", "http://"], "--endpoint: 'http://' is not an http:// or https:// address"),
    (["tiny/llama", "--timeout", "0"], "--timeout: 0 is not a positive number of seconds"),
    (["tiny/llama", "--revision", "main\n"], "--revision: 'main\\n' is not a branch, tag or commit"),
]


@pytest.mark.parametrize("args, expected", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_an_argument_that_names_nothing_is_one_line_before_any_request(tmp_path, capsys, no_proxy_or_token, args, expected):
    FakeHub.authorizations.clear()
    code, out, err = pin_here(capsys, *args, "--out", str(tmp_path / "out"))
    assert (code, out, err) == (2, "", f"error: {expected}; nothing was written\n")
    assert list(tmp_path.iterdir()) == [] and FakeHub.authorizations == []


def test_an_endpoint_from_hf_endpoint_is_checked_the_same(tmp_path, capsys, monkeypatch, no_proxy_or_token):
    monkeypatch.setenv("HF_ENDPOINT", "file:///etc")
    code, _, err = pin_here(capsys, "tiny/llama", "--out", str(tmp_path / "out"))
    assert (code, err) == (2, "error: HF_ENDPOINT: 'file:///etc' is not an http:// or https:// address; nothing was written\n")


def test_out_a_file_or_under_a_file_is_one_line(hub, tmp_path, capsys, no_proxy_or_token):
    endpoint, _ = hub
    a_file = tmp_path / "notes\nerror: all is well.txt"  # a newline in the name, escaped in the one line
    a_file.write_text("mine\n")
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(a_file))
    shown = str(a_file).replace("\n", "\\n")
    assert (code, err) == (1, f"error: --out: {shown}: is not a folder; give a folder (the file was left as it is); nothing was written\n")
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(a_file / "sub" / "llama"))
    assert (code, err) == (1, f"error: --out: {shown}/sub/llama: cannot be made: {shown} is not a folder; nothing was written\n")
    assert a_file.read_text() == "mine\n" and [p.name for p in tmp_path.iterdir()] == [a_file.name]
    # a folder no file can be made in (checked when the pin writes: as root, every folder is writable)
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", "/proc/atlas-pin")
    assert (code, err) == (1, "error: --out: /proc/atlas-pin: cannot be made (No such file or directory); nothing was written\n")


# --- an existing folder: updated, not clobbered ---------------------------------------------------


def test_a_single_file_repository_pinned_over_a_sharded_one_leaves_no_index(hub, tmp_path, capsys, no_proxy_or_token):
    endpoint, _ = hub
    out = tmp_path / "folder"
    assert pin_here(capsys, "tiny/sharded", "--endpoint", endpoint, "--out", str(out))[0] == 0
    assert (out / "model.safetensors.index.json").exists()
    assert pin_here(capsys, "tiny/fp8", "--endpoint", endpoint, "--out", str(out))[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.json", "config.json", "headers.json"]
    assert {t["file"] for t in json.loads((out / "headers.json").read_text())["tensors"]} == {"model.safetensors"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_what_a_person_wrote_in_checkpoint_json_is_kept(hub, pinned_folder, capsys):
    endpoint, _ = hub
    path = pinned_folder / "checkpoint.json"
    written = json.loads(path.read_text())
    by_hand = {"weight_dtype": "BF16", "revision_note": "checked against the model card",
               "stored_buffers": [{"name": "rotary.inv_freq", "dtype": "F32", "shape": [4]}]}
    path.write_text(json.dumps({**written, **by_hand, "layout": ["the embedding is stored once"],
                                "safetensors": {"tensors": 1}, "provenance": "old"}, indent=2))
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(pinned_folder))
    assert code == 0, err
    again = json.loads(path.read_text())
    assert {k: again[k] for k in by_hand} == by_hand and again["layout"] == ["the embedding is stored once"]
    assert again["safetensors"] == written["safetensors"] and again["provenance"] == written["provenance"]  # the pin's own, renewed
    assert list(again)[:4] == ["repo", "revision", "weight_dtype", "revision_note"]


def test_a_folder_with_fields_by_hand_for_another_repository_is_refused(hub, pinned_folder, capsys):
    endpoint, _ = hub
    path = pinned_folder / "checkpoint.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "weight_dtype": "BF16", "layout": ["by hand"]}))
    before = snapshot(pinned_folder.parent)
    code, _, err = pin_here(capsys, "tiny/fp8", "--endpoint", endpoint, "--out", str(pinned_folder))
    assert (code, err) == (1, f"error: {path}: weight_dtype, layout: written by hand for 'tiny/llama', not tiny/fp8; "
                              "pin into a new folder or remove them first; nothing was written\n")
    assert snapshot(pinned_folder.parent) == before


def test_figures_a_pin_does_not_measure_are_not_dropped_silently(hub, pinned_folder, capsys):
    endpoint, _ = hub
    path = pinned_folder / "checkpoint.json"
    written = json.loads(path.read_text())
    path.write_text(json.dumps({**written, "safetensors": {**written["safetensors"], "named_tensors": []}}))
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(pinned_folder))
    assert (code, err) == (1, f"error: {path}: safetensors.named_tensors: figures a pin does not measure; remove them (the pin measures "
                              "the rest) or pin into a new folder; nothing was written\n")


def test_a_folder_holding_other_files_is_refused(hub, pinned_folder, capsys):
    endpoint, _ = hub
    (pinned_folder / "model.safetensors").write_bytes(b"real weights")
    (pinned_folder / "NOTES.md").write_text("mine\n")
    before = snapshot(pinned_folder.parent)
    code, _, err = pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(pinned_folder))
    assert (code, err) == (1, f"error: --out: {pinned_folder}: holds NOTES.md, model.safetensors, which a pin does not write; "
                              "pin into a new folder or one a pin wrote; nothing was written\n")
    assert snapshot(pinned_folder.parent) == before


def test_a_write_cut_short_leaves_the_old_folder_whole(hub, pinned_folder):
    # The process may write no file past 1,000 bytes: headers.json or checkpoint.json is cut (EFBIG).
    endpoint, _ = hub
    before = snapshot(pinned_folder.parent)
    result = pin(ROOT, endpoint, "tiny/llama", "--out", str(pinned_folder), limit_file_bytes=1000)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"error: {pinned_folder}: cannot be written (File too large); nothing was written\n"
    assert snapshot(pinned_folder.parent) == before and sorted(p.name for p in pinned_folder.parent.iterdir()) == ["llama"]


# --- HF_TOKEN: where it is sent -------------------------------------------------------------------


def test_hf_token_goes_to_another_endpoint_only_when_asked_and_never_past_a_redirect(hub, tmp_path, capsys, monkeypatch, no_proxy_or_token):
    endpoint, _ = hub
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    FakeHub.authorizations.clear()
    assert pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(tmp_path / "a"))[0] == 0
    assert FakeHub.authorizations and all(auth is None for _, auth in FakeHub.authorizations)
    FakeHub.authorizations.clear()
    assert pin_here(capsys, "tiny/llama", "--endpoint", endpoint, "--out", str(tmp_path / "b"), "--send-token")[0] == 0
    assert FakeHub.authorizations and all(auth == "Bearer hf_secret" for _, auth in FakeHub.authorizations)
    # redirected to another address (the same server by another name): the token stays behind
    port = endpoint.rsplit(":", 1)[1]
    FakeHub.repos["tiny/elsewhere"] = {name: redirect(f"http://localhost:{port}/tiny/llama/resolve/{COMMIT}/{name}")
                                       for name in ("config.json", "model.safetensors")}
    FakeHub.authorizations.clear()
    assert pin_here(capsys, "tiny/elsewhere", "--endpoint", endpoint, "--out", str(tmp_path / "c"), "--send-token")[0] == 0
    firsts = [auth for path, auth in FakeHub.authorizations if path.startswith("/tiny/elsewhere/")]
    seconds = [auth for path, auth in FakeHub.authorizations if path.startswith("/tiny/llama/")]
    assert firsts and seconds and set(firsts) == {"Bearer hf_secret"} and set(seconds) == {None}


def test_a_proxy_named_by_the_environment_is_used(hub, tmp_path, capsys, monkeypatch, no_proxy_or_token):
    endpoint, _ = hub
    # the endpoint's name resolves nowhere: only the proxy (the fake Hub, asked by full URL) can answer
    monkeypatch.setenv("HTTP_PROXY", endpoint)
    monkeypatch.setenv("NO_PROXY", "")
    code, _, err = pin_here(capsys, "tiny/fp8", "--endpoint", "http://hub.invalid", "--out", str(tmp_path / "p"))
    assert code == 0, err
    assert json.loads((tmp_path / "p/checkpoint.json").read_text())["safetensors"]["tensors"] == 3
