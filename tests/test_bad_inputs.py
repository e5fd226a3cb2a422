"""Bad input, as a careful user gives it: every case ends in one line on stderr that names the file and
the field (or the argument), exit 1 (2 for usage), no traceback, and the previous site byte for byte.

One project copy and one previous site serve every case: a case edits files of the copy, the build
runs, and the files are put back before the next case.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, copy_project, run_build, snapshot

QWEN = "atlas/checkpoints/Qwen/Qwen3-0.6B"
GPT2 = "atlas/checkpoints/openai-community/gpt2"
MODULE = "atlas/families/qwen3_0_6b.py"
NOTES = "atlas/families/qwen3_0_6b.md"
NONE_YET = "\n\nNone yet.\n"  # prose a made-up family's notes might hold, on the file's last line


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A project copy with a site built in it (gpt2): the previous site every bad build must keep."""
    root = copy_project(tmp_path_factory.mktemp("bad-inputs"))
    result = run_build(root, "--family", "gpt2")
    assert result.returncode == 0, result.stderr
    return root


class Edits:
    """Files of the project copy a case changes, put back afterwards."""

    def __init__(self, root: Path):
        self.root, self.saved = root, {}

    def path(self, rel: str) -> Path:
        path = self.root / rel
        if rel not in self.saved:
            self.saved[rel] = path.read_bytes() if path.is_file() else None
        return path

    def json(self, rel: str, change) -> None:
        path = self.path(rel)
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data, indent=2))

    def text(self, rel: str, old: str, new: str) -> None:
        path = self.path(rel)
        text = path.read_text()
        assert old in text, f"{rel} no longer holds {old!r}: update the case"
        path.write_text(text.replace(old, new, 1))

    def write(self, rel: str, content: str | bytes) -> None:
        path = self.path(rel)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    def restore(self) -> None:
        for rel, content in self.saved.items():
            path = self.root / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            if content is not None:
                path.write_bytes(content)


def header_file(path: Path, header: bytes, payload: bytes = b"") -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + payload)


CHECKPOINT = 'checkpoint="Qwen/Qwen3-0.6B",'


def declare(edits: Edits, field: str) -> None:
    """One more field in the family module's declaration."""
    edits.text(MODULE, CHECKPOINT, f"{CHECKPOINT}\n    {field},")


def without(key):
    return lambda c: c.pop(key)


def setting(key, value):
    return lambda c: c.__setitem__(key, value)


# Each case: id, a function of (Edits, tmp folder) that breaks something and returns the build's
# arguments, the exit code, and the text the one line must hold (the file and the field named).
CASES = [
    # config.json
    ("config-no-hidden-size", lambda e, t: e.json(f"{QWEN}/config.json", without("hidden_size")), 1,
     f"{QWEN}/config.json: hidden_size: missing: the model would be built with Qwen3Config's default 4096"),
    ("config-no-intermediate-size", lambda e, t: e.json(f"{QWEN}/config.json", without("intermediate_size")), 1,
     f"{QWEN}/config.json: intermediate_size: missing"),
    ("config-no-vocab-size", lambda e, t: e.json(f"{QWEN}/config.json", without("vocab_size")), 1,
     f"{QWEN}/config.json: vocab_size: missing"),
    ("config-hidden-size-0", lambda e, t: e.json(f"{QWEN}/config.json", setting("hidden_size", 0)), 1,
     f"{QWEN}/config.json: hidden_size: must be a positive integer, not 0"),
    ("config-vocab-size-0", lambda e, t: e.json(f"{QWEN}/config.json", setting("vocab_size", 0)), 1,
     f"{QWEN}/config.json: vocab_size: must be a positive integer, not 0"),
    ("config-layers-word", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_hidden_layers", "sixty")), 1,
     f"{QWEN}/config.json: num_hidden_layers: must be a positive integer, not 'sixty'"),
    ("config-layers-0", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_hidden_layers", 0)), 1,
     f"{QWEN}/config.json: num_hidden_layers: must be a positive integer, not 0"),
    ("config-layers-float", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_hidden_layers", 28.5)), 1,
     f"{QWEN}/config.json: num_hidden_layers: must be a positive integer, not 28.5"),
    ("config-heads-0", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_attention_heads", 0)), 1,
     f"{QWEN}/config.json: num_attention_heads: must be a positive integer, not 0"),
    ("config-intermediate-negative", lambda e, t: e.json(f"{QWEN}/config.json", setting("intermediate_size", -5)), 1,
     f"{QWEN}/config.json: intermediate_size: must be a non-negative integer, not -5"),
    ("config-100000-layers", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_hidden_layers", 100_000)), 1,
     f"{QWEN}/config.json: num_hidden_layers: 100,000 layers is past the atlas's bound of 10,000"),
    ("config-too-many-parameters", lambda e, t: e.json(f"{QWEN}/config.json", setting("hidden_size", 10_000_000)), 1,
     f"{QWEN}/config.json: hidden_size: its sizes"),
    ("config-other-architecture", lambda e, t: e.json(f"{QWEN}/config.json", setting("architectures", ["LlamaForCausalLM"])), 1,
     f"{QWEN}/config.json: architectures: names LlamaForCausalLM, but the family atlas/families/qwen3_0_6b.py builds Qwen3ForCausalLM"),
    ("config-no-architectures", lambda e, t: e.json(f"{QWEN}/config.json", without("architectures")), 1,
     f"{QWEN}/config.json: architectures: missing"),
    ("config-eps-word", lambda e, t: e.json(f"{QWEN}/config.json", setting("rms_norm_eps", "tiny")), 1,
     f"{QWEN}/config.json: rms_norm_eps: must be a number, not 'tiny'"),
    ("config-bool-as-4", lambda e, t: e.json(f"{QWEN}/config.json", setting("tie_word_embeddings", 4)), 1,
     f"{QWEN}/config.json: tie_word_embeddings: must be true or false, not 4"),
    ("config-heads-do-not-tile", lambda e, t: e.json(f"{QWEN}/config.json", lambda c: (c.pop("head_dim"), c.update(num_attention_heads=7, num_key_value_heads=7))), 1,
     f"{QWEN}/config.json: num_attention_heads: 7 heads do not divide hidden_size 1,024, and no head_dim is given"),
    ("config-kv-heads-do-not-divide", lambda e, t: e.json(f"{QWEN}/config.json", setting("num_key_value_heads", 5)), 1,
     f"{QWEN}/config.json: num_key_value_heads: 5 key-value heads do not divide 16 query heads"),
    ("config-not-json", lambda e, t: e.write(f"{QWEN}/config.json", '{"hidden_size": 1024,'), 1,
     f"{QWEN}/config.json: line 1 column 22: not valid JSON"),
    ("config-a-list", lambda e, t: e.write(f"{QWEN}/config.json", "[1, 2]"), 1,
     f"{QWEN}/config.json: must hold a JSON object"),
    ("config-nested-deep", lambda e, t: e.write(f"{QWEN}/config.json", "[" * 100_000 + "]" * 100_000), 1,
     f"{QWEN}/config.json: not valid JSON (nested too deep)"),
    ("config-a-folder", lambda e, t: (e.path(f"{QWEN}/config.json").unlink(), (e.root / QWEN / "config.json").mkdir()), 1,
     f"{QWEN}/config.json: is a folder; only regular files are read"),
    ("config-missing", lambda e, t: e.path(f"{QWEN}/config.json").unlink(), 1,
     f"{QWEN}/config.json: file not found"),
    ("config-not-utf8", lambda e, t: e.write(f"{QWEN}/config.json", b'{"x": "\xff"}'), 1,
     f"{QWEN}/config.json: byte 7: not UTF-8 text"),
    # checkpoint.json
    ("pinned-other-repo", lambda e, t: e.json(f"{QWEN}/checkpoint.json", setting("repo", "Qwen/Qwen3-8B")), 1,
     f"{QWEN}/checkpoint.json: repo: says 'Qwen/Qwen3-8B', but the file is in the folder of 'Qwen/Qwen3-0.6B'"),
    ("pinned-no-revision", lambda e, t: e.json(f"{QWEN}/checkpoint.json", without("revision")), 1,
     f"{QWEN}/checkpoint.json: revision: missing"),
    # the vendor's count: in the vendor's form, with its words and address, and agreeing with ours or saying why not
    ("published-figure-in-words", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["published"].update(total="about 600 million")), 1,
     f"{QWEN}/checkpoint.json: published.total: must be a count as the vendor writes it: a number and K, M, B or T (\"7.27B\"), or the whole count (\"2,795,443,200\"), not 'about 600 million'"),
    ("published-source-not-https", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["published"].update(source="huggingface.co/Qwen/Qwen3-0.6B")), 1,
     f"{QWEN}/checkpoint.json: published.source: must be the https:// address a reader can check the figure at, not 'huggingface.co/Qwen/Qwen3-0.6B'"),
    ("published-unknown-key", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["published"].update(activated="0.6B")), 1,
     f"{QWEN}/checkpoint.json: published.activated: unknown: give total, active, says, source and differs only"),
    # by hand from Qwen3-0.6B's config.json: 151,936 × 1,024 (tied) + 1,024 + 28 × (6,291,456 attention + 256 q/k norms
    # + 9,437,184 MLP + 2,048 norms) = 596,049,920, which is 0.6B at one decimal, not 0.7B; and a reason where it agrees is stale
    ("published-disagrees-without-a-reason", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["published"].update(total="0.7B")), 1,
     f"{QWEN}/checkpoint.json: published.total: says 0.7B, but the atlas counts 596,049,920 parameters, 0.6B at those digits: give the reason they differ in published.differs"),
    ("published-reason-where-it-agrees", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["published"].update(differs="the card rounds")), 1,
     f"{QWEN}/checkpoint.json: published.differs: gives a reason they differ, but every figure agrees with the atlas's count at its digits"),
    ("pinned-buffer-without-dtype", lambda e, t: e.json(f"{GPT2}/checkpoint.json", lambda c: c["stored_buffers"][0].pop("dtype")), 1,
     f"{GPT2}/checkpoint.json: stored_buffers[0].dtype: missing"),
    ("pinned-buffer-dtype-a-list", lambda e, t: e.json(f"{GPT2}/checkpoint.json", lambda c: c["stored_buffers"][0].update(dtype=["F32"])), 1,
     f"{GPT2}/checkpoint.json: stored_buffers[0].dtype: unknown dtype ['F32']"),
    ("pinned-named-tensor-dtype-a-list", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["safetensors"]["named_tensors"]["lm_head.weight"].update(dtype=["BF16"])), 1,
     f"{QWEN}/checkpoint.json: safetensors.named_tensors.lm_head.weight: must give some of count, dtype, shape, file"),
    ("pinned-dtypes-holding-a-list", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["safetensors"].update(dtypes=[["BF16"]])), 1,
     f"{QWEN}/checkpoint.json: safetensors.dtypes: must list safetensors dtypes"),
    # a name with line breaks in it: still one line, the breaks written as escapes
    ("pinned-tensor-name-with-newlines", lambda e, t: e.json(f"{QWEN}/checkpoint.json", lambda c: c["safetensors"]["named_tensors"].update({"x\nerror: injected\r\x1b[2K": {"count": "many"}})), 1,
     f"{QWEN}/checkpoint.json: safetensors.named_tensors.x\\nerror: injected\\r\\u001b[2K: must give some of"),
    ("pinned-buffer-bad-shape", lambda e, t: e.json(f"{GPT2}/checkpoint.json", lambda c: c["stored_buffers"][0].update(shape="big")), 1,
     f"{GPT2}/checkpoint.json: stored_buffers[0].shape: must be a list of non-negative integers, not 'big'"),
    ("pinned-unknown-weight-dtype", lambda e, t: e.json(f"{QWEN}/checkpoint.json", setting("weight_dtype", "F7")), 1,
     f"{QWEN}/checkpoint.json: weight_dtype: unknown dtype 'F7'"),
    ("pinned-layout-not-a-list", lambda e, t: e.json(f"{QWEN}/checkpoint.json", setting("layout", "tied")), 1,
     f"{QWEN}/checkpoint.json: layout: must be a list of strings"),
    ("pinned-missing", lambda e, t: e.path(f"{QWEN}/checkpoint.json").unlink(), 1,
     f"{QWEN}/checkpoint.json: file not found"),
    ("pinned-not-json", lambda e, t: e.write(f"{QWEN}/checkpoint.json", "{'repo': 1}"), 1,
     f"{QWEN}/checkpoint.json: line 1 column 2: not valid JSON"),
    # the family module
    ("module-released-words", lambda e, t: declare(e, 'released="April 2025"'), 1,
     f"{MODULE}: released: must be the release month as YYYY-MM (e.g. 2025-07), not 'April 2025'"),
    ("module-released-month-13", lambda e, t: declare(e, 'released="2025-13"'), 1,
     f"{MODULE}: released: must be the release month as YYYY-MM"),
    ("module-checkpoint-escapes", lambda e, t: e.text(MODULE, CHECKPOINT, 'checkpoint="../../etc",'), 1,
     f"{MODULE}: checkpoint: must name a checkpoint as org/repo, not '../../etc'"),
    ("module-checkpoint-absent", lambda e, t: e.text(MODULE, CHECKPOINT, 'checkpoint="Qwen/Qwen9",'), 1,
     "atlas/checkpoints/Qwen/Qwen9: no pinned checkpoint folder"),
    ("module-sys-exit", lambda e, t: e.text(MODULE, "\nFAMILY = ", "\nimport sys\nsys.exit(0)\nFAMILY = "), 1,
     f"{MODULE}: cannot be imported (line 12): calls sys.exit(0)"),
    ("module-raises", lambda e, t: e.text(MODULE, "\nFAMILY = ", "\nraise RuntimeError('half written')\nFAMILY = "), 1,
     f"{MODULE}: cannot be imported (line 11): RuntimeError: half written"),
    ("module-unknown-field", lambda e, t: declare(e, 'relased="2025-04"'), 1,
     f"{MODULE}: cannot be imported (line "),
    ("module-config-class-misspelt", lambda e, t: declare(e, 'config_class="Qwen3Konfig"'), 1,
     f"{MODULE}: config_class: transformers 5.24.0 has no class 'Qwen3Konfig'"),
    ("module-empty-title", lambda e, t: e.text(MODULE, 'title="Qwen3-0.6B"', 'title=""'), 1,
     f"{MODULE}: title: must be a non-empty string, not ''"),
    ("module-notes-file-missing", lambda e, t: e.path(NOTES).unlink(), 1,
     f"{NOTES}: the notes file {MODULE} names is missing"),
    ("module-preview-raises", lambda e, t: declare(e, "preview=lambda config: 1 / 0"), 1,
     f"{MODULE}: preview: failed: ZeroDivisionError: division by zero"),
    # the notes
    ("notes-sys-exit", lambda e, t: e.write(NOTES, e.path(NOTES).read_text() + "\n```python\nimport sys\nsys.exit(0)\n```\n"), 1,
     f"{NOTES}: python block "),
    ("notes-raises", lambda e, t: e.write(NOTES, e.path(NOTES).read_text() + "\n```python\nassert False, 'the model is not what the notes say'\n```\n"), 1,
     "AssertionError: the model is not what the notes say"),
    ("notes-not-utf8", lambda e, t: e.write(NOTES, b"# Notes\n\nCaf\xe9 au lait.\n"), 1,
     f"{NOTES}: byte 12: not UTF-8 text; save the notes as UTF-8"),
    ("notes-say-none", lambda e, t: e.write(NOTES, e.path(NOTES).read_text() + NONE_YET), 1,
     f'{NOTES}: line {len(((ROOT / NOTES).read_text() + NONE_YET).splitlines())}: the prose says "None", a word a page shows only where a value went missing; '
     "write what it means instead (code in a ```python block may say it)"),
    ("notes-unknown-fact", lambda e, t: e.write(NOTES, e.path(NOTES).read_text() + "\nIt has {{ config.raw.no_such_key }} experts.\n"), 1,
     f"{NOTES}: {{{{ config.raw.no_such_key }}}}: names no fact of this family"),
]

COMMAND_LINE = [
    ("cli-unknown-family", ["--family", "kimi_k3"], 2, "unknown family 'kimi_k3'; known families: "),
    ("cli-unknown-option", ["--frob"], 2, "unrecognized arguments: --frob"),
    ("cli-serve-not-a-number", ["--serve", "eighty"], 2, "argument --serve: invalid int value: 'eighty'"),
    ("cli-serve-port-out-of-range", ["--family", "gpt2", "--serve", "70000"], 2, "--serve: 70000 is not a port number"),
    ("cli-weights-without-one-family", ["--weights", "/tmp"], 2, "--weights checks one family's checkpoint: give exactly one --family"),
]


@pytest.mark.parametrize("case, break_it, code, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_the_site_is_kept(workspace, tmp_path, case, break_it, code, expected):
    family = "gpt2" if case.startswith("pinned-buffer") else "qwen3_0_6b"
    site = workspace / "site"
    before = snapshot(site)
    edits = Edits(workspace)
    try:
        break_it(edits, tmp_path)
        result = run_build(workspace, "--family", family)
        if case in ("config-100000-layers", "config-too-many-parameters"):
            # refused before anything heavy: the build's process never imported torch (not timed, which
            # would depend on the machine)
            light = subprocess.run([sys.executable, "-c", REFUSED_LIGHT, family], cwd=workspace, capture_output=True, text=True, timeout=600)
            assert light.stdout.split() == ["1", "torch:False", "transformers:False"], light.stdout + light.stderr
    finally:
        edits.restore()
    assert_one_line(result, code, expected)
    assert snapshot(site) == before
    assert not list(workspace.glob(".site.*")), "a failed build left something beside the site"


REFUSED_LIGHT = """
import sys
import build
code = build.main(["--family", sys.argv[1]])
print(code, *(f"{m}:{m in sys.modules}" for m in ("torch", "transformers")))
"""


@pytest.mark.parametrize("case, args, code, expected", COMMAND_LINE, ids=[c[0] for c in COMMAND_LINE])
def test_a_bad_command_line_is_one_line(workspace, case, args, code, expected):
    before = snapshot(workspace / "site")
    result = run_build(workspace, *args)
    assert_one_line(result, code, expected)
    assert snapshot(workspace / "site") == before


def assert_one_line(result: subprocess.CompletedProcess, code: int, expected: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr and not result.stdout.strip()


def test_out_that_is_a_file_is_refused_and_left_as_it_is(workspace, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    result = run_build(workspace, "--family", "gpt2", "--out", str(target))
    assert_one_line(result, 1, f"--out: {target}: is not a folder; give a folder (the file was left as it is)")
    assert target.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_out_that_cannot_be_written_is_one_line(workspace):
    result = run_build(workspace, "--family", "gpt2", "--out", "/proc/atlas-site")
    assert_one_line(result, 1, "--out: /proc/atlas-site: ")


# --- --out a folder that is not a site, or the project itself; a full disk ------------------------

NOT_A_SITE = "give a new or empty folder, or a site a build made (its files were left as they are)"


def _not_a_site(folder: Path) -> None:
    (folder / "static").mkdir(parents=True)
    (folder / "index.html").write_text("<h1>my own page</h1>\n")
    (folder / "static" / "logo.png").write_bytes(b"\x89PNG my logo")


OUT_NOT_A_SITE = [
    ("my-page-and-logo", _not_a_site, "it holds 'index.html' but no compare/, and no .atlas-site marker"),
    ("a-file-of-mine", lambda f: (f.mkdir(), (f / "notes.txt").write_text("mine\n")),
     "it holds 'notes.txt', which a build does not write, and no .atlas-site marker"),
    ("a-family-folder-that-is-a-link", lambda f: (f.mkdir(), (f / "gpt2").symlink_to(f.parent)),
     "it holds 'gpt2', which a build does not write, and no .atlas-site marker"),
]


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` with what it is: a file's bytes, a link's target, a folder."""
    return {str(p.relative_to(folder)): (f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes() if p.is_file() else "folder")
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("case, make, why", OUT_NOT_A_SITE, ids=[c[0] for c in OUT_NOT_A_SITE])
def test_out_that_holds_the_users_own_files_is_refused_and_left_as_it_is(workspace, tmp_path, case, make, why):
    mine = tmp_path / "mine"
    make(mine)
    before = _tree(tmp_path)
    result = run_build(workspace, "--family", "gpt2", "--out", str(mine))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"error: --out: {mine}: is not a site the atlas built ({why}); {NOT_A_SITE}; the site in {mine} was left as it was\n"
    assert _tree(tmp_path) == before  # nothing in it, nothing beside it


@pytest.mark.parametrize("out", [".", "..", "atlas/.."])
def test_out_that_is_or_holds_the_project_is_refused(workspace, out):
    project = workspace.resolve()
    where = "is the project's own folder" if Path(project / out).resolve() == project else f"holds the project ({project})"
    listing = sorted(p.name for p in project.parent.iterdir()), sorted(p.name for p in project.iterdir())
    before = snapshot(workspace / "site")
    result = run_build(workspace, "--family", "gpt2", "--out", out)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (f"error: --out: {out}: {where}; a build replaces its --out folder whole: give a folder of its own, "
                             f"such as site (nothing in it was touched); the site in {out} was left as it was\n")
    assert (sorted(p.name for p in project.parent.iterdir()), sorted(p.name for p in project.iterdir())) == listing
    assert snapshot(workspace / "site") == before


def test_out_that_is_empty_missing_or_a_site_from_before_the_marker_is_built(workspace, tmp_path):
    site = snapshot(workspace / "site")
    assert site[".atlas-site"] == b"This folder is a site the architecture atlas built (python build.py --out); a build replaces it whole.\n"
    empty, missing, older = tmp_path / "empty", tmp_path / "missing" / "site", tmp_path / "older"
    empty.mkdir()
    shutil.copytree(workspace / "site", older)
    (older / ".atlas-site").unlink()  # a site an earlier build wrote, before sites were marked
    (older / "index.html").write_text("an older index\n")
    for out in (empty, missing, older):
        result = run_build(workspace, "--family", "gpt2", "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert snapshot(out) == site, out  # the same bytes as any site of gpt2, marker included


def test_a_newline_in_out_stays_on_the_one_error_line(workspace, tmp_path):
    out = tmp_path / "a\nerror: injected"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = run_build(workspace, "--family", "gpt2", "--out", str(out))
    shown = f"{tmp_path}/a\\nerror: injected"
    assert result.stderr == (f"error: --out: {shown}: is not a site the atlas built (it holds 'notes.txt', which a build does not write, "
                             f"and no .atlas-site marker); {NOT_A_SITE}; the site in {shown} was left as it was\n")
    assert (out / "notes.txt").read_text() == "mine\n"


FULL_DISK = """
set -e
mount -t tmpfs -o size="$3" tmpfs "$1"
cp -a site "$1/site"
set +e
"$4" build.py --family gpt2 --out "$1/site" 2>"$2/stderr"
echo "exit $?"
diff -r site "$1/site" && echo "site kept"
ls -A "$1"
"""


def test_a_full_disk_is_one_line_naming_the_file(workspace, tmp_path):
    # a real file system that is full: a tmpfs that holds the previous site and little more, mounted in
    # a mount namespace of the test's own (a user namespace: no privilege needed)
    disk = tmp_path / "disk"
    disk.mkdir()
    site = [p.stat().st_size for p in (workspace / "site").rglob("*") if p.is_file()]
    size = sum(-(-n // 4096) * 4096 for n in site) + 256 * 1024  # the pages of gpt2 alone are 2 MB
    run = subprocess.run(["unshare", "-rm", "sh", "-c", FULL_DISK, "sh", str(disk), str(tmp_path), str(size), sys.executable],
                         cwd=workspace, capture_output=True, text=True, timeout=600)
    if run.returncode != 0 and "unshare" in run.stderr:
        pytest.skip(f"no user namespace to mount a small file system in: {run.stderr.strip()}")
    assert run.stdout.splitlines() == ["exit 1", "site kept", "site"], run.stdout + run.stderr
    [line] = (tmp_path / "stderr").read_text().splitlines()
    # the file it was writing (a page, in the folder beside the site) or, where the atlas names it, the site
    assert re.fullmatch(f"error: (--out: )?{re.escape(str(disk))}/\\S+: no space left on device \\(free some space, then build again\\); "
                        f"the site in {re.escape(str(disk))}/site was left as it was", line), line


# --- local weights: the strict reader ---------------------------------------------------------------

def weights_case(tmp_path: Path, make) -> Path:
    folder = tmp_path / "weights"
    folder.mkdir()
    make(folder)
    return folder


def index(folder: Path, weight_map: dict) -> None:
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 4}, "weight_map": weight_map}))


def fifo_shard(folder: Path) -> None:
    index(folder, {"wte.weight": "model-00001-of-00001.safetensors"})
    os.mkfifo(folder / "model-00001-of-00001.safetensors")


WEIGHTS = [
    ("weights-missing", lambda f: f.rmdir(), "weights: not a directory"),
    ("weights-folder-named-safetensors", lambda f: (f / "model.safetensors").mkdir(),
     "weights: expected one .safetensors file or model.safetensors.index.json, found 0 .safetensors files"),
    ("weights-fifo-shard", fifo_shard, "weights/model-00001-of-00001.safetensors: is a pipe; only regular files are read"),
    ("weights-index-escapes", lambda f: index(f, {"wte.weight": "../../../../etc/passwd"}),
     "weights/model.safetensors.index.json: weight_map['wte.weight']: '../../../../etc/passwd' is not a plain .safetensors file name"),
    ("weights-index-absolute", lambda f: index(f, {"wte.weight": "/etc/passwd.safetensors"}),
     "weights/model.safetensors.index.json: weight_map['wte.weight']: '/etc/passwd.safetensors' is not a plain"),
    ("weights-header-nested", lambda f: header_file(f / "model.safetensors", b"[" * 100_000 + b"]" * 100_000),
     "weights/model.safetensors: header: JSON nested more than 6 deep"),
    ("weights-index-nested", lambda f: (f / "model.safetensors.index.json").write_text("[" * 100_000 + "]" * 100_000),
     "weights/model.safetensors.index.json: JSON nested more than 6 deep"),
    ("weights-index-a-folder", lambda f: (f / "model.safetensors.index.json").mkdir(),
     "weights/model.safetensors.index.json: is a folder; only regular files are read"),
]


@pytest.mark.parametrize("case, make, expected", WEIGHTS, ids=[c[0] for c in WEIGHTS])
def test_a_bad_local_checkpoint_is_one_line(workspace, tmp_path, case, make, expected):
    before = snapshot(workspace / "site")
    folder = weights_case(tmp_path, make)
    # a pipe never makes the reader wait; the timeout only ends a hang, it measures nothing
    result = run_build(workspace, "--family", "gpt2", "--weights", str(folder))
    assert_one_line(result, 1, expected)
    assert snapshot(workspace / "site") == before
