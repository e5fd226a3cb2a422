"""Shared fixtures: facts collected once per session, a site built once, a copy of the project for
builds that must fail, and tiny real models for checkpoints the tests write."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests import warm

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ("atlas", "templates", "static", "build.py", "requirements.lock", "package-lock.json", "node_modules")


def released_config(name: str) -> dict:
    """The family's pinned config.json as the file holds it: the tests' independent source of sizes (for
    a multimodal wrapper, the section its text model reads)."""
    from atlas import families

    family = families.load(name)
    whole = json.loads((ROOT / "atlas/checkpoints" / family.checkpoint / "config.json").read_text())
    return whole[family.config_section] if family.config_section else whole


def search_data(site: Path) -> dict:
    """The index's search data (search-data.js beside index.html): each family's standard names and
    libraries' names, read back from the script the index loads."""
    text = (site / "search-data.js").read_text(encoding="utf-8")
    prefix = "window.ATLAS_SEARCH = "
    assert text.startswith(prefix) and text.endswith(";\n"), text[:80]
    return json.loads(text[len(prefix):-2])


def run_build(project: Path, *args: str, fresh: bool = False) -> subprocess.CompletedProcess:
    """`python build.py *args` in ``project``, forked from a warm interpreter (tests/warm.py), or started
    cold where ``fresh``: a build whose bytes are compared with another's gets a hash seed of its own."""
    return warm.run(["build.py", *args], cwd=project, timeout=600, fresh=fresh)


@pytest.fixture(scope="session")
def collected():
    """Facts of a family, collected once a session as the build collects them: from the facts cache
    (.atlas-cache/) where the family's inputs are unchanged, else afresh, which also fills the cache.
    In a whole run the site of ``built_site`` is built first (test_browser), collecting every family in
    worker processes, so the facts here are read back from that build's cache, not collected twice."""
    from atlas.build.parallel import collect_all

    held = {}

    def get(name):
        if name not in held:
            held[name] = collect_all([name])[0]
        return held[name]

    return get


@pytest.fixture(scope="session")
def kimi(collected):
    return collected("kimi_k2").facts


def build_families(tmp_path_factory, *names: str) -> Path:
    """Some families, built by the real command line into a temporary site folder."""
    out = tmp_path_factory.mktemp("built") / "site"
    result = run_build(ROOT, *(arg for name in names for arg in ("--family", name)), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The whole atlas, built once by the real command line into a temporary folder: once for the whole
    run where pytest-xdist runs the tests in several processes (the first to need it builds it, under a
    lock; the others wait, then read it, or fail with its error)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        out = tmp_path_factory.mktemp("site") / "site"
        result = run_build(ROOT, "--out", str(out), fresh=True)
        assert result.returncode == 0, result.stderr
        return out
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's own
    out, outcome = shared / "built-site" / "site", shared / "built-site.outcome"
    with (shared / "built-site.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            result = run_build(ROOT, "--out", str(out), fresh=True)
            outcome.write_text("" if result.returncode == 0 else result.stderr or f"exit {result.returncode}", encoding="utf-8")
    failure = outcome.read_text(encoding="utf-8")
    assert not failure, failure
    return out


def copy_project(into: Path) -> Path:
    """The project's parts a build reads, copied into ``into``: a project a test may break."""
    for part in PROJECT_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, into / part, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
        elif source.exists():
            shutil.copy2(source, into / part)
    return into


@pytest.fixture
def project_copy(tmp_path) -> Path:
    """A copy of the project a test may break without touching the real one."""
    return copy_project(tmp_path)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` by relative path, with its bytes: what "left as it was" is checked against."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def tree_rows(node):
    yield node
    for child in node["children"]:
        yield from tree_rows(child)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served(folder: Path):
    """``folder`` served on a free port of 127.0.0.1 for the block: its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


CHROMIUM = "/usr/bin/chromium"  # Debian's: Playwright cannot download its own browser here
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    """One Chromium for a module's browser tests (closed with the module: a test elsewhere may start its own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()

