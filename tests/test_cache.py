"""The facts cache: a family is collected again exactly when one of its inputs changed, a cached build
writes the very bytes an uncached one writes and imports neither torch nor transformers, and a
damaged entry is rebuilt, never trusted.

The builds run the real command line in a copy of the project (its own .atlas-cache/), whose files
the tests edit one kind at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atlas.facts import cache
from atlas.facts.collected import Collected
from atlas.inputs.family import StoredTensor
from tests import warm
from tests.conftest import ROOT, copy_project, snapshot

FAMILY = "gpt2"
PAGE = f"{FAMILY}/index.html"


def build(project: Path, *args: str, fresh: bool = False) -> subprocess.CompletedProcess:
    """build.py in ``project``, with the one-line-per-family progress asked for on stderr (warm, or cold
    where ``fresh``, as conftest.run_build)."""
    env = {**os.environ, "ATLAS_PROGRESS": "1"}
    return warm.run(["build.py", "--family", FAMILY, *args], cwd=project, env=env, timeout=900, fresh=fresh)


def how_collected(result: subprocess.CompletedProcess) -> str:
    """'collected' or 'cached': what the build's progress line says it did with the family."""
    assert result.returncode == 0, result.stderr
    words = [line.split() for line in result.stderr.splitlines()]
    [line] = [w for w in words if w and w[0] == FAMILY]
    return line[1]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project, and its site built without the cache, then with it (filling it), then from it."""
    root = copy_project(tmp_path_factory.mktemp("project"))
    uncached = build(root, "--no-cache", "--out", "uncached", fresh=True)
    assert uncached.returncode == 0, uncached.stderr
    assert not (root / ".atlas-cache").exists()  # --no-cache neither reads nor writes entries
    assert how_collected(build(root, "--out", "filled")) == "collected"
    assert how_collected(build(root, "--out", "cached")) == "cached"
    return root


def test_cached_and_uncached_builds_are_byte_identical(project):
    uncached = snapshot(project / "uncached")
    assert PAGE in uncached and f"{FAMILY}/facts.json" in uncached
    assert snapshot(project / "filled") == uncached
    assert snapshot(project / "cached") == uncached


def test_a_cached_build_imports_neither_torch_nor_transformers(project):
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "import build\n"
        f"build.build([{FAMILY!r}], Path('again'))\n"
        "print(json.dumps({m: m in sys.modules for m in ('torch', 'transformers')}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"torch": False, "transformers": False}
    assert snapshot(project / "again") == snapshot(project / "uncached")


def test_a_damaged_entry_is_collected_again_and_rewritten(project):
    entries = project / ".atlas-cache"
    facts_entry, pages_entry = entries / f"{FAMILY}.facts.json", entries / f"{FAMILY}.pages.json"
    facts_entry.write_bytes(facts_entry.read_bytes()[: facts_entry.stat().st_size // 2])  # cut short
    body = bytearray(pages_entry.read_bytes())
    body[-10] ^= 0x01  # one bit off, the JSON still well-formed
    pages_entry.write_bytes(bytes(body))
    result = build(project, "--out", "repaired")
    assert how_collected(result) == "collected"
    assert "Traceback" not in result.stderr
    assert snapshot(project / "repaired") == snapshot(project / "uncached")
    assert how_collected(build(project, "--out", "repaired-again")) == "cached"


def test_a_site_already_built_from_the_same_inputs_is_left_alone(project):
    first = build(project, "--out", "twice")
    assert how_collected(first) in ("cached", "collected")
    before = {p: p.stat().st_mtime_ns for p in (project / "twice").rglob("*")}
    again = build(project, "--out", "twice")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout == f"twice/ is up to date: nothing {FAMILY} depends on has changed since the last build wrote it\n"
    assert {p: p.stat().st_mtime_ns for p in (project / "twice").rglob("*")} == before
    # the site touched by hand, or another family's build into it: built again, whole
    (project / "twice" / FAMILY / "index.html").write_text("edited by hand\n")
    assert how_collected(build(project, "--out", "twice")) == "cached"
    assert snapshot(project / "twice") == snapshot(project / "uncached")


def test_a_site_is_built_again_when_a_static_file_changes(project):
    assert build(project, "--out", "styled").returncode == 0
    script = project / "static" / "cost.js"
    original = script.read_bytes()
    try:
        script.write_bytes(original + b"// edited after the last build\n")
        again = build(project, "--out", "styled")
        assert again.returncode == 0 and "up to date" not in again.stdout
        assert (project / "styled" / "static" / "cost.js").read_bytes().endswith(b"// edited after the last build\n")
    finally:  # the project copy is the module's: the other tests build from it as it was
        script.write_bytes(original)


def test_a_page_edited_in_place_with_its_time_put_back_is_built_again(project):
    out = project / "restored"
    assert build(project, "--out", "restored").returncode == 0
    page = out / PAGE
    before, text = page.stat(), page.read_bytes()
    edited = text.replace(b"<title>", b"<title>!", 1)[:-1]  # the same length: a title changed, the last byte gone
    assert edited != text and len(edited) == len(text)
    with page.open("r+b") as f:  # in place: the same file, the same inode
        f.write(edited)
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = page.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert how_collected(build(project, "--out", "restored")) == "cached"  # built again, not "up to date"
    assert snapshot(out) == snapshot(project / "uncached")


@pytest.mark.parametrize("kind", ["a pipe", "a link to /dev/zero"])
def test_an_entry_that_is_not_a_regular_file_is_never_read(project, kind):
    entries = project / ".atlas-cache"
    odd = [entries / f"{FAMILY}.{part}.json" for part in ("facts", "pages")]
    for entry in odd:
        entry.unlink()
        os.mkfifo(entry) if kind == "a pipe" else entry.symlink_to("/dev/zero")
    out = f"odd-{kind.split()[-1].strip('/').replace('/', '-')}"
    result = build(project, "--out", out)  # a pipe opened for reading would wait for a writer for good
    assert how_collected(result) == "collected"
    assert snapshot(project / out) == snapshot(project / "uncached")
    assert all(entry.is_file() and not entry.is_symlink() for entry in odd)  # written again, as files


@pytest.mark.parametrize("kind", ["a file", "not writable"])
def test_a_cache_that_cannot_be_used_is_left_aside_with_a_note(project, kind):
    entries, aside = project / ".atlas-cache", project / "cache-aside"
    out = f"no-cache-{kind.replace(' ', '-')}"
    entries.rename(aside)
    try:
        if kind == "a file":
            entries.write_text("not a folder\n")
        else:
            entries.symlink_to("/sys/kernel")  # a folder no one may create a file in, root included
        result = build(project, "--out", out)
        note = result.stderr.splitlines()[0]
        if kind == "a file":
            assert note == "note: .atlas-cache: is not a folder; building without the cache"
            assert entries.read_text() == "not a folder\n"
        else:
            assert note.startswith("note: .atlas-cache: cannot be written (") and note.endswith("); building without the cache")
        assert how_collected(result) == "collected"
        assert len(result.stderr.splitlines()) == 2  # the note and the progress line, nothing else
        assert snapshot(project / out) == snapshot(project / "uncached")
    finally:
        entries.unlink()
        aside.rename(entries)


def test_only_a_regular_file_within_the_limit_is_read(tmp_path):
    (tmp_path / "entry").write_bytes(b"x" * 100)
    assert cache.read_regular(tmp_path / "entry") == b"x" * 100
    assert cache.read_regular(tmp_path / "entry", limit=99) is None
    (tmp_path / "zero").symlink_to("/dev/zero")
    assert cache.read_regular(tmp_path / "zero") is None
    assert cache.read_regular(Path("/dev/zero")) is None  # a device, not a file: nothing read
    assert cache.read_regular(tmp_path / "missing") is None


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _provenance(path: Path) -> str:
    pinned = json.loads(path.read_text(encoding="utf-8"))
    pinned["provenance"] = pinned.get("provenance", "") + " Edited by the cache test."
    path.write_text(json.dumps(pinned, indent=2) + "\n", encoding="utf-8")
    return pinned["provenance"]


# Each kind of input, edited in the copy: the next build must collect the family again, and where the
# edit shows on the page, the page shows it.
EDITS = {
    "family module": lambda p: _append(p / "atlas/families/gpt2.py", "\n# edited by the cache test\n"),
    "notes": lambda p: _append(p / "atlas/families/gpt2.md", "\nEdited by the cache test.\n"),
    "checkpoint file": lambda p: _provenance(p / "atlas/checkpoints/openai-community/gpt2/checkpoint.json"),
    "new checkpoint file": lambda p: (p / "atlas/checkpoints/openai-community/gpt2/README.txt").write_text("pinned by hand\n"),
    "atlas source": lambda p: _append(p / "atlas/numbers.py", "\n# edited by the cache test\n"),
    "schema": lambda p: _append(p / "atlas/facts/facts.schema.json", "\n"),
    "requirements.lock": lambda p: _append(p / "requirements.lock", "# edited by the cache test\n"),
    "package-lock.json": lambda p: _append(p / "package-lock.json", "\n"),
}


@pytest.mark.parametrize("kind", list(EDITS))
def test_an_edit_to_any_input_collects_the_family_again(project, kind):
    shown = EDITS[kind](project)
    out = f"edited-{kind.replace(' ', '-')}"
    assert how_collected(build(project, "--out", out)) == "collected"
    if kind == "notes":
        assert "Edited by the cache test." in (project / out / PAGE).read_text(encoding="utf-8")
    if kind == "checkpoint file":
        assert json.loads((project / out / f"{FAMILY}/facts.json").read_text())["checkpoint"]["provenance"] == shown


# --- the key's inputs and the entries themselves (no build) ----------------------------------------


def test_a_family_is_keyed_by_its_own_module_the_modules_it_imports_and_its_notes():
    families = ROOT / "atlas" / "families"
    # kimi_k2.py says `from atlas.families.deepseek_v3 import FAMILY` and notes=("kimi_k2", "deepseek_v3")
    kimi = cache.family_inputs("kimi_k2")
    assert {families / "kimi_k2.py", families / "deepseek_v3.py", families / "kimi_k2.md", families / "deepseek_v3.md"} <= set(kimi)
    assert set(kimi) >= set((ROOT / "atlas/checkpoints/moonshotai/Kimi-K2-Instruct").iterdir())
    gpt2 = cache.family_inputs("gpt2")
    assert [p for p in gpt2 if p.parent == families] == [families / "gpt2.py", families / "gpt2.md"]
    shared = cache.shared_inputs()
    assert families / "__init__.py" in shared and not any(p.parent == families and p.stem in ("gpt2", "kimi_k2") for p in shared)
    assert {ROOT / "requirements.lock", ROOT / "package-lock.json", ROOT / "atlas/facts/facts.schema.json", ROOT / "atlas/render/site.py"} <= set(shared)


def _collected() -> Collected:
    facts = {"family": {"name": "toy"}, "sizes": [1, 2.5, None, True], "words": "naïve ✓"}
    layout = [StoredTensor("wte.weight", "F32", (50257, 768), "parameter"),
              StoredTensor("blocks", "U8", (2, 3), "parameter", values_per_element=2)]
    return Collected(facts, layout)


def test_an_entry_reads_back_as_it_was_stored_and_only_under_its_key(tmp_path):
    assert cache.store_facts("toy", "k1", _collected(), tmp_path)
    back = cache.load_facts("toy", "k1", tmp_path)
    assert back == _collected()
    assert cache.load_facts("toy", "k2", tmp_path) is None
    assert cache.load_facts("other", "k1", tmp_path) is None


@pytest.mark.parametrize("damage", ["cut short", "one bit off", "empty", "not json", "a folder"])
def test_a_damaged_entry_is_a_miss(tmp_path, damage):
    cache.store_facts("toy", "k1", _collected(), tmp_path)
    entry = tmp_path / "toy.facts.json"
    data = entry.read_bytes()
    if damage == "cut short":
        entry.write_bytes(data[:-7])
    elif damage == "one bit off":
        entry.write_bytes(data[:-3] + bytes([data[-3] ^ 0x02]) + data[-2:])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "not json":
        entry.write_bytes(b"\xff\xfe garbage\n" + data)
    else:
        entry.unlink()
        entry.mkdir()
    assert cache.load_facts("toy", "k1", tmp_path) is None
    if damage != "a folder":
        assert cache.store_facts("toy", "k1", _collected(), tmp_path)  # and written again
        assert cache.load_facts("toy", "k1", tmp_path) == _collected()


def test_facts_that_would_not_read_back_exactly_are_not_kept(tmp_path):
    for facts in ({"shape": (1, 2)}, {"by_index": {3: "x"}}):
        assert not cache.store_facts("toy", "k", Collected(facts, []), tmp_path)
        assert cache.load_facts("toy", "k", tmp_path) is None


def test_a_local_checkpoints_facts_are_never_kept(tmp_path):
    local = _collected()
    local.local_tensors = []
    assert not cache.store_facts("toy", "k", local, tmp_path)


def test_rendered_pages_are_reused_for_the_same_facts_only(tmp_path):
    calls = []

    def render(facts):
        calls.append(facts["n"])
        return {"toy/index.html": f"<p>{facts['n']}</p>\n"}

    assert cache.rendered("toy", {"n": 1}, render, tmp_path) == {"toy/index.html": "<p>1</p>\n"}
    assert cache.rendered("toy", {"n": 1}, render, tmp_path) == {"toy/index.html": "<p>1</p>\n"}
    assert cache.rendered("toy", {"n": 2}, render, tmp_path) == {"toy/index.html": "<p>2</p>\n"}
    assert calls == [1, 2]


def test_a_facts_json_is_checked_against_the_schema_again_only_when_its_bytes_change(tmp_path):
    checked = []
    for text in (b'{"a": 1}', b'{"a": 1}', b'{"a": 2}', b'{"a": 1}'):
        cache.schema_passed("toy", text, lambda: checked.append(text), tmp_path)
    assert checked == [b'{"a": 1}', b'{"a": 2}', b'{"a": 1}']  # one entry per family: the latest bytes


def test_a_failed_schema_check_is_never_remembered(tmp_path):
    def failing():
        raise ValueError("does not match")

    for _ in range(2):
        with pytest.raises(ValueError):
            cache.schema_passed("toy", b"{}", failing, tmp_path)


def test_an_index_card_view_is_reused_for_the_same_facts_only(tmp_path):
    calls = []

    def view(facts):
        calls.append(facts["n"])
        return {"kinds": [facts["n"]], "blocks": [], "search": []}

    for n in (1, 1, 2):
        assert cache.index_view({"family": {"name": "toy"}, "n": n}, view, tmp_path)["kinds"] == [n]
    assert calls == [1, 2]


def test_with_the_cache_off_nothing_is_read_or_written(tmp_path):
    cache.enable(False)
    try:
        assert cache.rendered("toy", {"n": 1}, lambda f: {"toy/index.html": "x"}, tmp_path) == {"toy/index.html": "x"}
        cache.schema_passed("toy", b"{}", lambda: None, tmp_path)
        cache.index_view({"family": {"name": "toy"}}, lambda f: {"kinds": []}, tmp_path)
    finally:
        cache.enable(True)
    assert list(tmp_path.iterdir()) == []
