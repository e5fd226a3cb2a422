"""`build.py --serve` as a user runs it, in a copy of the project, with real edits: the warm worker that
rebuilds (the same process across edits of notes, family modules and templates, a fresh one after an
edit to the atlas's own code), a family module that loops forever (stopped by the edit that fixes it,
or at the deadline, naming the line), a module pointed at another checkpoint folder (then watched
there), the status only the site's own pages can read (Chromium), and stopping the server, by Ctrl-C
or outright (nothing it started outlives it).

Nothing here depends on the machine's speed: every wait is for an event (a line the server prints, a
file the looping module writes, a process gone), bounded only so that a broken server fails a test
instead of hanging it. The servers share one project copy, so that only the first builds its two families cold."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import CHROMIUM, copy_project, served
from tests.test_serve import request

LONG = 600  # a bound on waiting for an event, never an expectation of how quickly it comes
REBUILT = r"^rebuilt gpt2 in [\d.]+ s \(worker (\d+)\)$"
OTHER = "gptj"  # a second family in the site: an edit to what both share rebuilds both in one rebuild
BOTH = rf"^rebuilt gpt2, {OTHER} in [\d.]+ s \(worker (\d+)\)$"
DEADLINE = 10  # the second server's --rebuild-deadline


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT as a terminal gives it: a shell that starts pytest in the background (`make test &`,
    nohup) hands its children SIGINT ignored, and Python then installs no handler for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Live:
    """A running `build.py --family gpt2 --family gptj --serve 0` and every line it has printed."""

    def __init__(self, project: Path, *args: str):
        self.project = project
        self.process = subprocess.Popen(
            [sys.executable, "build.py", "--family", "gpt2", "--family", OTHER, "--out", "site", "--serve", "0", *args],
            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_at_a_terminal)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.new: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True).start()
        self.url = self.wait_for(r"at (http://127\.0\.0\.1:\d+/)")[1]
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            self.new.put(None)

    def mark(self) -> int:
        """Where the lines printed from now on start."""
        return len(self.lines)

    def wait_for(self, pattern: str, start: int = 0) -> re.Match:
        """The first line from ``start`` on that matches ``pattern``, waiting for it as it is printed."""
        deadline = time.monotonic() + LONG
        seen = start
        while True:
            for line in self.lines[seen:]:
                found = re.search(pattern, line)
                if found:
                    return found
                seen += 1
            if self.process.poll() is not None and self.new.empty():
                raise AssertionError(f"the server ended ({self.process.returncode}) before printing {pattern!r}: {self.lines} {self.errors}")
            try:
                self.new.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{pattern!r} was not printed within {LONG} s: {self.lines} {self.errors}") from None

    def worker(self) -> int:
        """The worker now serving rebuilds, once it is ready."""
        ready = [int(m[1]) for m in (re.search(r"^worker (\d+) ready", line) for line in self.lines) if m]
        return ready[-1] if ready else int(self.wait_for(r"^worker (\d+) ready")[1])

    def status(self) -> dict:
        status, _, body = request(self.port, "/__atlas__/status.json")
        assert status == 200
        return json.loads(body)

    def page(self) -> str:
        return request(self.port, "/gpt2/index.html")[2].decode("utf-8")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=LONG)


def children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(parent, []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    kids, found, todo = children(), [], [pid]
    while todo:
        for kid in kids.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def until(predicate, what: str):
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {LONG} s")


def looping(good: str, marker: Path) -> str:
    """The module with a loop that never ends at its import, announced by a file it writes first."""
    return good + f"\nimport pathlib, time\npathlib.Path({str(marker)!r}).write_text('looping')\nwhile True: time.sleep(0.05)\n"


def start_looping(module: Path, good: str, marker: Path) -> None:
    marker.unlink(missing_ok=True)
    module.write_text(looping(good, marker), encoding="utf-8")
    until(marker.exists, "the looping rebuild starting")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("serve-project"))


@pytest.fixture(scope="module")
def live(project):
    server = Live(project)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hasty(project, live):
    """A second server on the same project (the first stopped: both would watch it), with a short
    deadline; the site and the cache are the first one's, so its start builds nothing."""
    live.stop()
    server = Live(project, "--rebuild-deadline", str(DEADLINE))
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def module(project):
    """gpt2's module, put back as it was after the test, whatever happened in it."""
    path = project / "atlas" / "families" / "gpt2.py"
    good = path.read_text(encoding="utf-8")
    yield path, good
    if path.read_text(encoding="utf-8") != good:
        path.write_text(good, encoding="utf-8")


def test_notes_edits_are_rebuilt_by_the_same_warm_worker(live, project):
    worker = live.worker()
    notes = project / "atlas" / "families" / "gpt2.md"
    for marker in ("Written by the first edit.", "Written by the second edit."):
        start = live.mark()
        notes.write_text(notes.read_text(encoding="utf-8") + f"\n{marker}\n", encoding="utf-8")
        assert int(live.wait_for(REBUILT, start)[1]) == worker
        assert marker in live.page()
    assert alive(worker)
    assert live.status()["error"] is None


def test_an_edited_family_module_is_read_afresh_by_the_same_worker(live, module):
    path, good = module
    worker = live.worker()
    start = live.mark()
    path.write_text(good.replace('title="GPT-2"', 'title="GPT-2, as edited"'), encoding="utf-8")
    assert int(live.wait_for(REBUILT, start)[1]) == worker
    assert "GPT-2, as edited" in live.page()
    start = live.mark()
    path.write_text(good, encoding="utf-8")
    assert int(live.wait_for(REBUILT, start)[1]) == worker
    assert "GPT-2, as edited" not in live.page()


def test_templates_are_reread_by_the_same_worker_and_an_atlas_edit_replaces_it(live, project):
    worker = live.worker()
    base = project / "templates" / "base.html"
    start = live.mark()
    base.write_text(base.read_text(encoding="utf-8") + "<!-- an edit to a template -->\n", encoding="utf-8")
    assert int(live.wait_for(BOTH, start)[1]) == worker
    assert "<!-- an edit to a template -->" in live.page()

    source = project / "atlas" / "inputs" / "layers.py"
    start = live.mark()
    source.write_text(source.read_text(encoding="utf-8") + "\n# an edit to the atlas's own code\n", encoding="utf-8")
    live.wait_for(rf"^atlas/inputs/layers\.py changed: worker {worker} is replaced by a fresh one$", start)
    # both families collected anew, in one rebuild: with more than one core, in a pool forked from it
    fresh = int(live.wait_for(BOTH, start)[1])
    assert fresh != worker and fresh == live.worker()
    assert not alive(worker)
    assert live.status()["error"] is None


def test_a_module_pointed_at_another_checkpoint_folder_is_watched_there(live, module, project):
    path, good = module
    old = project / "atlas" / "checkpoints" / "openai-community" / "gpt2"
    new = old.with_name("gpt2-copy")
    shutil.copytree(old, new)
    pinned = json.loads((new / "checkpoint.json").read_text(encoding="utf-8"))
    (new / "checkpoint.json").write_text(json.dumps({**pinned, "repo": "openai-community/gpt2-copy"}, indent=2), encoding="utf-8")
    start = live.mark()
    path.write_text(good.replace('checkpoint="openai-community/gpt2"', 'checkpoint="openai-community/gpt2-copy"'), encoding="utf-8")
    live.wait_for(REBUILT, start)
    assert "<code>openai-community/gpt2-copy</code>" in live.page()
    generation = live.status()["generation"]

    start = live.mark()
    (new / "config.json").write_text((new / "config.json").read_text(encoding="utf-8") + "\n", encoding="utf-8")
    live.wait_for(REBUILT, start)  # only a folder watched now can have caused it
    assert live.status()["generation"] == generation + 1  # and the folder newly watched was no change in itself

    start = live.mark()
    path.write_text(good, encoding="utf-8")
    live.wait_for(REBUILT, start)
    assert "<code>openai-community/gpt2</code>" in live.page()


def test_an_edit_made_while_a_rebuild_loops_stops_it_and_is_rebuilt(live, module, tmp_path):
    path, good = module
    worker = live.worker()
    start_looping(path, good, tmp_path / "looping")
    assert live.status()["building"] == ["gpt2"]
    rebuild = descendants(worker)
    assert rebuild and all(alive(p) for p in rebuild)
    start = live.mark()
    path.write_text(good, encoding="utf-8")  # the fix, made while the rebuild still loops
    live.wait_for(r"^gpt2 changed again: the rebuild running is stopped and started again$", start)
    assert int(live.wait_for(REBUILT, start)[1]) == worker
    assert live.status()["error"] is None
    assert not any(alive(p) for p in rebuild)


def test_a_worker_that_died_is_replaced_by_a_fresh_one(live, project):
    worker = live.worker()
    os.kill(worker, signal.SIGKILL)  # as the kernel's out-of-memory killer would
    until(lambda: not alive(worker), "the worker ending")
    notes = project / "atlas" / "families" / "gpt2.md"
    start = live.mark()
    notes.write_text(notes.read_text(encoding="utf-8") + "\nWritten after the worker died.\n", encoding="utf-8")
    live.wait_for(rf"^worker {worker} ended: a fresh one is started$", start)
    fresh = int(live.wait_for(REBUILT, start)[1])
    assert fresh != worker and alive(fresh)
    assert "Written after the worker died." in live.page()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make test installs it)")
def test_an_open_page_reloads_and_shows_a_failed_rebuild_and_no_other_origin_reads_the_status(live, module, project, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    path, good = module
    status_url = f"{live.url}__atlas__/status.json"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "index.html").write_text("<!doctype html><title>another origin</title>\n", encoding="utf-8")
    marker = "Written while the page was open."
    with served(tmp_path / "other") as other, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        requests, errors = [], []
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(live.url + "gpt2/index.html")
        assert marker not in page.inner_text("body")
        page.evaluate("window.servedBeforeTheEdit = true")  # gone once the page has really reloaded

        notes = project / "atlas" / "families" / "gpt2.md"
        notes.write_text(notes.read_text(encoding="utf-8") + f"\n{marker}\n", encoding="utf-8")
        until(lambda: marker in page.inner_text("body"), "the page showing the edited notes")
        assert page.evaluate("window.servedBeforeTheEdit") is None

        path.write_text(good + "\nFAMILY = (\n", encoding="utf-8")
        shown = lambda: page.locator("#atlas-serve-status").inner_text(timeout=1000)  # noqa: E731
        banner = until(lambda: page.locator("#atlas-serve-status").count() and "error:" in shown() and shown(),
                       "the failed rebuild's error in the page")
        assert page.get_attribute("#atlas-serve-status", "role") == "alert"
        assert "error: atlas/families/gpt2.py" in banner
        assert marker in page.inner_text("body")  # the last good site, still served
        path.write_text(good, encoding="utf-8")
        until(lambda: page.locator("#atlas-serve-status").is_hidden(), "the error gone once the module is fixed")
        assert not errors, errors
        assert all(u.startswith(live.url) or u.startswith("data:") for u in requests), requests

        elsewhere = browser.new_page()  # a page of another origin, on the same machine
        elsewhere.goto(other)
        outcome = elsewhere.evaluate("""async (url) => {
            const script = await new Promise((done) => {
                window.atlasServeStatus = () => done("called");
                const s = document.createElement("script");
                s.src = url;
                s.onload = () => done("ran");
                s.onerror = () => done("refused");
                document.head.appendChild(s);
            });
            let read;
            try { read = await (await fetch(url)).text(); } catch (e) { read = "refused"; }
            return [script, read];
        }""", status_url)
        assert outcome == ["refused", "refused"]
        browser.close()


def test_ctrl_c_stops_the_server_its_worker_and_the_rebuild_it_runs(live, module, tmp_path):
    path, good = module
    start_looping(path, good, tmp_path / "looping")
    started = descendants(live.process.pid)
    assert live.worker() in started and len(descendants(live.worker())) >= 1  # the worker, and its rebuild
    live.process.send_signal(signal.SIGINT)
    assert live.process.wait(timeout=LONG) == 0
    until(lambda: not any(alive(p) for p in started), "every process the server started ending")


def test_a_rebuild_past_its_deadline_is_stopped_naming_the_line_and_the_fix_is_rebuilt(hasty, module, project, tmp_path):
    path, good = module
    worker = hasty.worker()
    page = (project / "site" / "gpt2" / "index.html").read_bytes()
    start = hasty.mark()
    start_looping(path, good, tmp_path / "looping")
    line = looping(good, tmp_path / "looping").splitlines().index("while True: time.sleep(0.05)") + 1
    expected = (f"error: atlas/families/gpt2.py: line {line}: still running when the rebuild's deadline of {DEADLINE} s "
                f"passed (--rebuild-deadline): the rebuild of gpt2 was stopped, and the site in site was left as it was")
    assert hasty.wait_for(r"^error: .*", start)[0] == expected
    assert hasty.status() == {"generation": 0, "error": expected, "building": []}
    assert alive(worker) and descendants(worker) == []  # the worker stays; its rebuild is gone
    assert (project / "site" / "gpt2" / "index.html").read_bytes() == page

    start = hasty.mark()
    path.write_text(good, encoding="utf-8")
    assert int(hasty.wait_for(REBUILT, start)[1]) == worker
    assert hasty.status() == {"generation": 1, "error": None, "building": []}


def test_a_server_killed_outright_leaves_nothing_running(hasty, module, tmp_path):
    path, good = module
    hasty.worker()
    start_looping(path, good, tmp_path / "looping")
    started = descendants(hasty.process.pid)
    hasty.process.kill()  # no chance to stop anything: the worker sees its stdin close
    hasty.process.wait()
    until(lambda: not any(alive(p) for p in started), "every process the server started ending")
