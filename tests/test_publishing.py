"""Publishing that cannot half-happen: builds killed at random moments, two builds into one folder at
once, symbolic links placed in the site.

The killed and concurrent builds are processes that publish real pages (a family folder the real
command line built) through the real ``atlas.build.site.write_site``, the last step of ``build.py``; the
steps before it write nothing. ``ATLAS_TEST_PUBLISH_PAUSE`` widens the windows between its steps so that
kills land inside them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, build_families, snapshot

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


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.fixture(scope="module")
def families_built(tmp_path_factory) -> Path:
    """gpt2 and qwen3_0_6b, built once by the real command line: the pages the publishing tests write."""
    return build_families(tmp_path_factory, "gpt2", "qwen3_0_6b")


def publish(out: Path, marker: str, *folders: Path, pause: float = 0.0) -> subprocess.Popen:
    env = {**os.environ, "ATLAS_TEST_PUBLISH_PAUSE": str(pause)}
    return subprocess.Popen([sys.executable, "-c", PUBLISH, str(out), marker, *map(str, folders)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> str:
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return err


def test_a_build_killed_at_any_moment_leaves_a_whole_site(families_built, tmp_path):
    out = tmp_path / "site"
    gpt2 = families_built / "gpt2"
    finish(publish(out, "A", gpt2))
    versions = {"A": snapshot(out)}
    finish(publish(out, "B", gpt2))
    versions["B"] = snapshot(out)
    assert versions["A"] != versions["B"] and leftovers(out) == []

    start = time.perf_counter()
    finish(publish(out, "A", gpt2, pause=0.15))
    span = time.perf_counter() - start  # how long a publish takes with the widened windows
    rng = random.Random(20261129)
    killed_in_time = 0
    for trial in range(20):
        marker = "AB"[trial % 2]
        process = publish(out, marker, gpt2, pause=0.15)
        time.sleep(rng.uniform(0.05, span))
        if process.poll() is None:
            killed_in_time += 1
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        # at every instant the site is one of the two whole versions, never a mixture or nothing
        assert snapshot(out) in (versions["A"], versions["B"]), f"trial {trial}: the site is not whole after a kill"
    assert killed_in_time >= 15, f"only {killed_in_time} of 20 kills landed while publishing"

    finish(publish(out, "B", gpt2))  # the next build removes what the killed ones left
    assert snapshot(out) == versions["B"]
    assert leftovers(out) == []


def test_two_builds_at_once_keep_both_families(families_built, tmp_path):
    for trial in range(20):
        out = tmp_path / f"site{trial}"
        first = publish(out, "first", families_built / "gpt2", pause=0.7)
        deadline = time.monotonic() + 60
        while not leftovers(out):  # the first holds the lock once its staging folder exists
            assert time.monotonic() < deadline and first.poll() is None, first.stderr.read() if first.stderr else ""
            time.sleep(0.01)
        second = publish(out, "second", families_built / "qwen3_0_6b")
        finish(first)
        said = finish(second)
        assert said.strip() == f"waiting for another build into {tmp_path} to finish publishing ..."
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["compare", "gpt2", "qwen3_0_6b", "static"], f"trial {trial}"
        index = (out / "index.html").read_text()
        assert 'href="gpt2/index.html"' in index and 'href="qwen3_0_6b/index.html"' in index
        assert leftovers(out) == []


def test_two_real_builds_at_once_both_land(tmp_path):
    out = tmp_path / "site"
    env = {**os.environ, "ATLAS_TEST_PUBLISH_PAUSE": "1"}
    runs = [subprocess.Popen([sys.executable, "build.py", "--family", name, "--out", str(out)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("gpt2", "qwen3_0_6b")]
    for run in runs:
        run.communicate(timeout=600)
        assert run.returncode == 0
    index = (out / "index.html").read_text()
    assert 'href="gpt2/index.html"' in index and 'href="qwen3_0_6b/index.html"' in index
    assert (out / "gpt2" / "facts.json").is_file() and (out / "qwen3_0_6b" / "facts.json").is_file()


def test_a_symlink_in_the_site_is_not_followed_or_kept(families_built, tmp_path):
    out = tmp_path / "site"
    finish(publish(out, "A", families_built / "gpt2"))
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("not for the site\n")
    (out / "outside").symlink_to(secret)
    (out / "gpt2" / "key.txt").symlink_to(secret / "key.txt")
    said = finish(publish(out, "B", families_built / "qwen3_0_6b"))
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
    finish(publish(out, "A", families_built / "gpt2"))
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
        code = f"from pathlib import Path; from atlas import publish; print([p.name for p in publish.leftovers(Path({str(out)!r}))])"
        seen = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert seen.strip() == "['.site.pages-99997']"
    assert not running.exists() and dead.exists()
