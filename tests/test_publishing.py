"""Publishing that cannot half-happen: builds killed at each step of publishing, two builds into one
folder at once, symbolic links placed in the site.

The killed and concurrent builds are processes that publish real pages (a family folder the real
command line built) through the real ``atlas.build.site.write_site``, the last step of ``build.py``; the
steps before it write nothing. ``ATLAS_TEST_PUBLISH_STEP`` stops a build at a named step of publishing
(``atlas.build.publish.STEPS``): it kills itself there, or holds there until the test lets it go. Nothing
waits for a moment to pass, so no result depends on how fast the machine is.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atlas.build import publish
from tests.conftest import ROOT, build_families, run_build, snapshot

PUBLISH = """
import sys
from pathlib import Path
from atlas import families
from atlas.build.site import write_site

out, marker = Path(sys.argv[1]), sys.argv[2]
files = {}
for folder in sys.argv[3:]:
    folder = Path(folder)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            files[f"{folder.name}/{path.relative_to(folder)}"] = path.read_text(encoding="utf-8")
    files[f"{folder.name}/index.html"] += f"<!-- published as {marker} -->\\n"
write_site(out, files, families.names())
"""
WAITING = "waiting for another build into {} to finish publishing ..."


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.fixture(scope="module")
def families_built(tmp_path_factory) -> Path:
    """gpt2 and qwen3_0_6b, built once by the real command line: the pages the publishing tests write."""
    return build_families(tmp_path_factory, "gpt2", "qwen3_0_6b")


def publish_process(out: Path, marker: str, *folders: Path, step: str = "") -> subprocess.Popen:
    env = {**os.environ, publish.STEP_VARIABLE: step}
    return subprocess.Popen([sys.executable, "-c", PUBLISH, str(out), marker, *map(str, folders)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> str:
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return err


def reached(gate: Path, process: subprocess.Popen) -> str:
    """Wait until ``process`` holds at the step its gate names (or has ended, which fails the test)."""
    while not (gate / "reached").exists():
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.01)
    return (gate / "reached").read_text()


def first_line(process: subprocess.Popen) -> str:
    """The first line ``process`` writes on stderr (it is still running)."""
    ready, _, _ = select.select([process.stderr], [], [], 600)  # a guard against a hang, not a measure of speed
    assert ready, "nothing on stderr"
    return process.stderr.readline().rstrip("\n")


@pytest.mark.parametrize("step", publish.STEPS)
def test_a_build_killed_at_each_step_of_publishing_leaves_a_whole_site(families_built, tmp_path, step):
    out = tmp_path / "site"
    gpt2 = families_built / "gpt2"
    finish(publish_process(out, "A", gpt2))
    old = snapshot(out)
    killed = publish_process(out, "B", gpt2, step=f"{step} kill")
    killed.communicate(timeout=600)
    assert killed.returncode == -signal.SIGKILL, f"the build did not reach {step!r}"
    # the old site whole up to the exchange, the new one whole from it: never a mixture, never nothing
    now = snapshot(out)
    if step == "exchanged":
        assert now != old and "<!-- published as B -->" in now["gpt2/index.html"].decode()
    else:
        assert now == old
    assert now[".atlas-site"] == publish.MARKER_TEXT.encode()
    finish(publish_process(out, "B", gpt2))  # the next build removes what the killed one left
    assert leftovers(out) == []
    new = snapshot(out)
    if step == "exchanged":
        assert new == now  # it was the new site already
    assert new.keys() == old.keys() and "<!-- published as B -->" in new["gpt2/index.html"].decode()


@pytest.mark.parametrize("step", publish.STEPS)
def test_two_builds_at_once_keep_both_families(families_built, tmp_path, step):
    out, gate = tmp_path / "site", tmp_path / "gate"
    gate.mkdir()
    finish(publish_process(out, "zero", families_built / "gpt2"))
    first = publish_process(out, "first", families_built / "gpt2", step=f"{step} hold {gate}")
    reached(gate, first)  # the first holds the lock, and stays at this step
    second = publish_process(out, "second", families_built / "qwen3_0_6b")
    assert first_line(second) == WAITING.format(tmp_path)  # the second waits for the lock ...
    (gate / "go").write_text("")
    finish(first)
    assert finish(second) == ""  # ... and then starts from the first one's site
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["compare", "gpt2", "qwen3_0_6b", "static"]
    assert "<!-- published as first -->" in (out / "gpt2" / "index.html").read_text()
    assert "<!-- published as second -->" in (out / "qwen3_0_6b" / "index.html").read_text()
    index = (out / "index.html").read_text()
    assert 'href="gpt2/index.html"' in index and 'href="qwen3_0_6b/index.html"' in index
    assert leftovers(out) == []


def test_two_real_builds_at_once_both_land(tmp_path):
    out, gate = tmp_path / "site", tmp_path / "gate"
    gate.mkdir()
    env = {**os.environ, publish.STEP_VARIABLE: f"copied hold {gate}"}
    first = subprocess.Popen([sys.executable, "build.py", "--family", "gpt2", "--out", str(out)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reached(gate, first)
    second = subprocess.Popen([sys.executable, "build.py", "--family", "qwen3_0_6b", "--out", str(out)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first_line(second) == WAITING.format(tmp_path)
    (gate / "go").write_text("")
    for run in (first, second):
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    index = (out / "index.html").read_text()
    assert 'href="gpt2/index.html"' in index and 'href="qwen3_0_6b/index.html"' in index
    assert (out / "gpt2" / "facts.json").is_file() and (out / "qwen3_0_6b" / "facts.json").is_file()
    assert leftovers(out) == []


def test_a_terminated_build_removes_what_it_made_and_keeps_the_site(tmp_path):
    out = tmp_path / "site"
    assert run_build(ROOT, "--family", "gpt2", "--out", str(out)).returncode == 0
    before = snapshot(out)
    env = {**os.environ, publish.STEP_VARIABLE: "written term"}
    result = subprocess.run([sys.executable, "build.py", "--family", "qwen3_0_6b", "--out", str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 128 + signal.SIGTERM
    assert result.stderr == f"error: terminated; the site in {out} was left as it was\n"
    assert snapshot(out) == before
    assert leftovers(out) == []  # its pages folder and its staging folder too


def test_what_a_killed_build_left_goes_with_an_up_to_date_build(tmp_path):
    out = tmp_path / "site"
    assert run_build(ROOT, "--family", "gpt2", "--out", str(out)).returncode == 0
    before = snapshot(out)
    env = {**os.environ, publish.STEP_VARIABLE: "copied kill"}
    killed = subprocess.run([sys.executable, "build.py", "--family", "qwen3_0_6b", "--out", str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL
    assert [name.rsplit("-", 1)[0] for name in leftovers(out)] == [".site.building", ".site.pages"]
    again = run_build(ROOT, "--family", "gpt2", "--out", str(out))
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout == f"{out}/ is up to date: nothing gpt2 depends on has changed since the last build wrote it\n"
    assert leftovers(out) == []
    assert snapshot(out) == before


def test_a_symlink_in_the_site_is_not_followed_or_kept(families_built, tmp_path):
    out = tmp_path / "site"
    finish(publish_process(out, "A", families_built / "gpt2"))
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("not for the site\n")
    (out / "outside").symlink_to(secret)
    (out / "gpt2" / "key.txt").symlink_to(secret / "key.txt")
    said = finish(publish_process(out, "B", families_built / "qwen3_0_6b"))
    assert not (out / "outside").exists() and not (out / "outside").is_symlink()
    assert not (out / "gpt2" / "key.txt").exists()
    assert not any(p.is_symlink() for p in out.rglob("*"))
    assert f"note: {out}/outside is a symbolic link; the new site leaves it out" in said
    assert (secret / "key.txt").read_text() == "not for the site\n"


def test_what_a_crashed_build_left_is_removed(families_built, tmp_path):
    out = tmp_path / "site"
    (tmp_path / ".site.building-99999").mkdir()
    (tmp_path / ".site.building-99999" / "half.html").write_text("half\n")
    (tmp_path / ".site.previous-99998").mkdir()
    (tmp_path / ".site.pages-99997" / "gpt2").mkdir(parents=True)  # the pages a killed build's workers wrote
    finish(publish_process(out, "A", families_built / "gpt2"))
    assert leftovers(out) == []
    assert (out / "gpt2" / "index.html").is_file()


def test_a_running_builds_pages_folder_is_not_taken_for_a_leftover(tmp_path):
    from atlas.build import publish

    out = tmp_path / "site"
    dead = tmp_path / ".site.pages-99997"
    dead.mkdir()
    with publish.pages_folder(out) as running:
        assert running.name == f".site.pages-{os.getpid()}"
        # another build, cleaning up under the lock, finds the dead build's folder only
        code = f"from pathlib import Path; from atlas.build import publish; print([p.name for p in publish.leftovers(Path({str(out)!r}))])"
        seen = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert seen.strip() == "['.site.pages-99997']"
    assert not running.exists() and dead.exists()
