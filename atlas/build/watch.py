"""Watching the served site's inputs and rebuilding what is edited, for ``build.py --serve``.

Watching: four times a second the server compares the modification times and sizes of each served
family's inputs (its module and the modules it imports, its notes, every file of its checkpoint
folder) and of what every family shares (the atlas source, templates, static files, lock files,
build.py). A change rebuilds the families it touches, in a rebuild thread, so that the watcher goes
on watching: an edit to the families being rebuilt stops that rebuild and starts it again with the
edit. What each family depends on is read again after each of its rebuilds, by the process that
built it, so a module that names another checkpoint folder is watched there.

Rebuilds run in the warm worker (atlas/build/serve_worker.py): one process that has imported torch,
transformers and the atlas, and forks a child per rebuild that runs build.py's ``main`` as a fresh
process would. The worker is replaced when it has ended or when a file of the code it imported (the
atlas's Python but the family modules, build.py, the lock files) has changed since it started;
family modules, notes, checkpoint folders, templates and static files are read by each rebuild
afresh. A rebuild still running after the deadline (``--rebuild-deadline``) is stopped, and its error
names the line of the project it was running. Stopping the server (Ctrl-C, SIGTERM) stops the worker
and its rebuild; a server killed outright closes the worker's stdin, and the worker then stops both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.25  # a poll stats a few hundred files: a few milliseconds
DEADLINE_SECONDS = 300  # a rebuild still running after this is stopped (build.py --rebuild-deadline)
WORKER_START_SECONDS = 300  # the worker's imports, bounded too: an edit to the atlas may loop at import


class Status:
    """What the open pages fetch: the number of successful rebuilds, the families being rebuilt, and the
    last failed rebuild's error line."""

    def __init__(self):
        self.generation = 0
        self.error: str | None = None
        self.building: list[str] = []
        self.lock = threading.Lock()

    def json(self) -> bytes:
        with self.lock:
            state = {"generation": self.generation, "error": self.error, "building": self.building}
        return json.dumps(state).encode("utf-8")


def code_files() -> list[Path]:
    """The files a worker may hold as imported code: the atlas's Python but the family modules (each
    rebuild imports those afresh), build.py, and the lock files that say which torch, transformers and
    KaTeX are installed (the worker keeps KaTeX's output)."""
    from atlas.build.serve_worker import family_modules

    _, families = family_modules()
    source = [p for p in sorted((ROOT / "atlas").rglob("*.py")) if p.parent != families or p.name == "__init__.py"]
    return source + [ROOT / "build.py", ROOT / "requirements.lock", ROOT / "package-lock.json"]


def shared_paths() -> list[Path]:
    """What every family's pages are built from: the atlas source, schema, lock files, templates,
    static files and build.py."""
    from atlas.facts import cache

    static = sorted(p for p in (ROOT / "static").rglob("*") if p.is_file())
    return cache.shared_inputs() + cache.render_inputs() + static + [ROOT / "build.py"]


class Dependencies:
    """What each served family is built from, as last read: files, and folders (its checkpoint's) in
    which a file added later belongs to it too. Read after every rebuild by the process that has just
    built the family (a module edited to name another checkpoint folder is then watched there); a
    family first seen is read here."""

    def __init__(self):
        self.of: dict[str, tuple[list[Path], list[Path]]] = {}

    def update(self, name: str, reported: dict | None) -> None:
        from atlas.build.serve_worker import family_modules

        module = family_modules()[1] / f"{name}.py"
        if reported is None:  # its module cannot be loaded now: what was watched stays watched, and the module
            files, folders = self.of.get(name, ([], []))
            self.of[name] = (files if module in files else files + [module], folders)
        else:
            self.of[name] = ([Path(p) for p in reported["files"]], [Path(p) for p in reported["folders"]])

    def watched(self, served: list[str]) -> dict[Path, set[str]]:
        """Every file whose change calls for a rebuild, with the families it calls for."""
        watched: dict[Path, set[str]] = {}
        for name in served:
            if name not in self.of:
                self.update(name, _read_here(name))
            files, folders = self.of[name]
            for path in files + [p for folder in folders if folder.is_dir() for p in sorted(folder.rglob("*")) if p.is_file()]:
                watched.setdefault(path, set()).add(name)
        for path in shared_paths():
            watched.setdefault(path, set()).update(served)
        return watched


def _read_here(name: str) -> dict | None:
    from atlas.build.serve_worker import family_dependencies

    try:
        return family_dependencies(name)
    except Exception:  # noqa: BLE001 - the rebuild names what is wrong; meanwhile its module is watched
        return None


def _stamps(paths) -> dict[Path, tuple[int, int] | None]:
    stamps = {}
    for path in paths:
        try:
            st = path.stat()
            stamps[path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamps[path] = None
    return stamps


@dataclasses.dataclass
class Outcome:
    """How a rebuild ended: published (ok), failed with its one error line, or stopped because its
    inputs changed again (superseded: it is started again with them). ``inputs``: what the families
    rebuilt depend on now, as the rebuild read them."""

    ok: bool
    message: str = ""
    inputs: dict = dataclasses.field(default_factory=dict)
    superseded: bool = False
    worker: int | None = None  # the process that built it


class Running:
    """One rebuild in a thread of its own, so that the watcher goes on watching while it runs."""

    def __init__(self, names: list[str], rebuild: Callable[[list[str], threading.Event], Outcome]):
        self.names = names
        self.cancel = threading.Event()
        self.outcome: Outcome | None = None
        self.start = time.perf_counter()
        self.thread = threading.Thread(target=self._run, args=(rebuild,), daemon=True)
        self.thread.start()

    def _run(self, rebuild) -> None:
        try:
            self.outcome = rebuild(self.names, self.cancel)
        except Exception as e:  # noqa: BLE001 - the server keeps serving the last good site whatever happens here
            self.outcome = Outcome(False, f"error: the rebuild could not run: {type(e).__name__}: {e}")

    def done(self) -> bool:
        return not self.thread.is_alive()


def watch(families: Callable[[], list[str]], rebuild: Callable[[list[str], threading.Event], Outcome],
          status: Status, stop: threading.Event, say: Callable[[str], None] = print) -> None:
    """Poll the inputs of the served families and rebuild those whose inputs changed, one rebuild at a
    time, in a thread of its own. An edit made while a rebuild runs is seen at the next poll: to the
    families being rebuilt, it stops that rebuild (its result would be stale) and starts it again with
    the edit; to others, they are rebuilt next. A family whose rebuild failed is rebuilt with the next
    change too, so its error stays shown until it is fixed, whichever family that change is in."""
    dependencies = Dependencies()
    served = families()
    watched = dependencies.watched(served)
    before = _stamps(watched)
    failed: set[str] = set()
    pending: set[str] = set()
    running: Running | None = None
    while not stop.wait(POLL_SECONDS):
        try:
            was_served, was_watched = served, watched
            served = families()
            watched = dependencies.watched(served)
            now = _stamps(watched)
            changed: set[str] = set()
            for path, stamp in now.items():
                if path in before and before[path] != stamp:
                    changed |= watched[path]
                elif path not in before:  # a new file: a change where it belongs to a family served before
                    changed |= watched[path] & set(was_served)
            for path in before.keys() - now.keys():  # a file gone
                changed |= was_watched.get(path, set()) & set(served)
            before = now
            pending |= changed
            if running is not None and changed & set(running.names) and not running.cancel.is_set():
                say(f"{', '.join(sorted(changed & set(running.names)))} changed again: the rebuild running is stopped and started again")
                running.cancel.set()
            if running is not None and running.done():
                outcome = running.outcome
                if outcome.superseded:
                    pending |= set(running.names)
                else:
                    for name, reported in outcome.inputs.items():
                        dependencies.update(name, reported)
                    watched = dependencies.watched(served)
                    # a file watched from now on (the module names another folder) is a baseline, not a change:
                    # the rebuild that just ended read it; one no longer watched is forgotten
                    before = {path: before.get(path, stamp) for path, stamp in _stamps(watched).items()}
                    _report(status, running, outcome, say)
                    failed = set() if outcome.ok else set(running.names)
                running = None
            if running is None and pending:
                names = sorted(pending | failed)
                pending = set()
                with status.lock:
                    status.building = names
                running = Running(names, rebuild)
        except Exception as e:  # noqa: BLE001 - the server keeps serving the last good site whatever happens here
            message = f"error: the watcher could not run: {type(e).__name__}: {e}"
            with status.lock:
                status.error = message
            say(message)
            with contextlib.suppress(Exception):  # watched afresh from here on, not stuck on what failed
                watched = dependencies.watched(served)
                before = _stamps(watched)
    if running is not None:
        running.cancel.set()


def _report(status: Status, running: Running, outcome: Outcome, say: Callable[[str], None]) -> None:
    with status.lock:
        status.building = []
        if outcome.ok:
            status.generation += 1
            status.error = None
        else:
            status.error = outcome.message
    seconds = time.perf_counter() - running.start
    by = f" (worker {outcome.worker})" if outcome.worker else ""
    say(f"rebuilt {', '.join(running.names)} in {seconds:.1f} s{by}" if outcome.ok else outcome.message)


def error_line(stderr: str, names: list[str], code: int) -> str:
    """A failed rebuild's one line: the build's own error line, else what ended it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    if errors:
        return errors[0]
    ended = f"was killed by signal {-code}" if code < 0 else f"ended with exit code {code}"
    return f"error: the rebuild of {', '.join(names)} {ended}" + (f": {lines[-1]}" if lines else "")


_CANCELLED, _TIMED_OUT = "cancelled", "timed out"


class Worker:
    """The warm worker process (atlas/build/serve_worker.py), as the server drives it: started in a session
    of its own, so that stopping it reaches nothing else; its rebuilds lead process groups of their own."""

    def __init__(self, served: list[str], say: Callable[[str], None]):
        self.code = _stamps(code_files())  # before it starts: an edit made while it imports makes it stale
        boot = f"import sys; sys.path[0] = {str(ROOT)!r}; from atlas.build.serve_worker import run; run(sys.argv[1:])"
        self.process = subprocess.Popen([sys.executable, "-c", boot, *served], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.process.pid
        self.say = say
        self.messages: queue.Queue = queue.Queue()
        self.answered = threading.Event()  # it is ready, or cannot be
        self.imported: list[Path] | None = None
        self.failure: str | None = None
        self.child: int | None = None
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "ready" in message:
                self.imported = [Path(p) for p in message["imported"]]
                self.say(f"worker {self.pid} ready: torch, transformers and the atlas imported in {message['seconds']:.1f} s")
                self.answered.set()
            elif "failed" in message:
                self.failure = message["failed"]
                self.answered.set()
            else:
                self.messages.put(message)
        if not self.answered.is_set():
            self.failure = f"error: the rebuild worker ended while importing the atlas (exit code {self.process.wait()})"
            self.answered.set()
        self.messages.put(None)

    def _next(self, until: float, cancel: threading.Event | None):
        while True:
            if cancel is not None and cancel.is_set():
                return _CANCELLED
            left = until - time.monotonic()
            if left <= 0:
                return _TIMED_OUT
            try:
                return self.messages.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue

    def _send(self, message: dict) -> bool:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):  # it has ended
            return False

    def alive(self) -> bool:
        return self.process.poll() is None and self.failure is None

    def stale(self) -> list[Path]:
        """The files of its code edited since it started."""
        files = self.imported if self.imported is not None else list(self.code)
        now = _stamps(files)
        return [p for p in files if now[p] != self.code.get(p)]

    def ready(self, seconds: float, cancel: threading.Event):
        """None once it has imported everything; else its import error line, _CANCELLED or _TIMED_OUT."""
        until = time.monotonic() + seconds
        while not self.answered.wait(0.1):
            if cancel.is_set():
                return _CANCELLED
            if time.monotonic() > until:
                return _TIMED_OUT
        return self.failure

    def build(self, names: list[str], out: Path, deadline: float, cancel: threading.Event):
        """The worker's report of one rebuild (its "done" message); _CANCELLED once stopped because
        ``cancel`` was set; None if the worker ended or stopped answering (it is then stopped)."""
        if not self._send({"build": names, "out": str(out), "deadline": deadline}):
            return None
        until = time.monotonic() + deadline + 30  # the worker stops its rebuild at the deadline; this, if it cannot
        asked = False
        while True:
            message = self._next(until, None if asked else cancel)
            if message == _CANCELLED:
                asked = self._send({"stop": True})
                if not asked:
                    return None
                continue
            if message is None or message == _TIMED_OUT:
                self.close()
                return None
            if "started" in message:
                self.child = message["started"]
            elif "done" in message:
                self.child = None
                return _CANCELLED if message["stopped"] == "asked" else message

    def close(self) -> None:
        """Stop it and whatever rebuild it runs: it ends its rebuild's process group and itself when its
        stdin closes; one that does not (still importing, or stuck) is killed, and so is its rebuild's group."""
        if self.closed:
            return
        self.closed = True
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            clean = self.process.wait(timeout=2) == 0
        except subprocess.TimeoutExpired:
            clean = False
        if not clean:
            if self.child is not None:  # started and not reported done: the worker has not reaped it
                try:
                    os.killpg(self.child, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.process.kill()  # its session holds nothing else: each rebuild leads a group of its own
            self.process.wait()


class WarmBuilder:
    """Rebuilds in the warm worker, replaced when it has ended or holds code edited since it started."""

    def __init__(self, out: Path, deadline: float, served: Callable[[], list[str]], say: Callable[[str], None]):
        self.out = out
        self.deadline = deadline
        self.served = served
        self.say = say
        self.lock = threading.Lock()
        self.worker: Worker | None = None
        self.closed = False

    def start(self) -> None:
        """Start the worker now, so that the first edit finds it warm."""
        with self.lock:
            if not self.closed and self.worker is None:
                self.worker = Worker(self.served(), self.say)

    def _current(self) -> Worker | None:
        with self.lock:
            if self.closed:
                return None
            worker = self.worker
            if worker is not None and worker.alive() and not worker.stale():
                return worker
            if worker is not None:
                edited = worker.stale()
                if edited:
                    self.say(f"{_shown(edited[0])} changed: worker {worker.pid} is replaced by a fresh one")
                elif worker.failure is None:
                    self.say(f"worker {worker.pid} ended: a fresh one is started")
                worker.close()
            self.worker = Worker(self.served(), self.say)
            return self.worker

    def __call__(self, names: list[str], cancel: threading.Event) -> Outcome:
        worker = self._current()
        if worker is None:
            return Outcome(False, superseded=True)
        failure = worker.ready(max(WORKER_START_SECONDS, self.deadline), cancel)
        if failure == _CANCELLED:
            return Outcome(False, superseded=True)
        if failure == _TIMED_OUT:
            self._discard(worker)
            return Outcome(False, f"error: the rebuild worker did not finish importing the atlas within "
                                  f"{max(WORKER_START_SECONDS, self.deadline):g} s and was stopped; the site in {self.out} was left as it was")
        if failure is not None:
            self._discard(worker)
            return Outcome(False, f"{failure}; the site in {self.out} was left as it was")
        done = worker.build(names, self.out, self.deadline, cancel)
        if done == _CANCELLED:
            return Outcome(False, superseded=True)
        if done is None:
            self._discard(worker)
            return Outcome(False, f"error: the rebuild worker (pid {worker.pid}) ended while rebuilding {', '.join(names)}; "
                                  f"a fresh one is started for the next rebuild, and the site in {self.out} was left as it was")
        inputs = done["inputs"] or {}
        if done["stopped"] == "deadline":
            where = f"{done['where']}: still running" if done["where"] else "still running"
            return Outcome(False, f"error: {where} when the rebuild's deadline of {self.deadline:g} s passed "
                                  f"(--rebuild-deadline): the rebuild of {', '.join(names)} was stopped, and the site in "
                                  f"{self.out} was left as it was", inputs)
        if done["done"] == 0:
            return Outcome(True, inputs=inputs, worker=worker.pid)
        return Outcome(False, error_line(done["stderr"], names, done["done"]), inputs)

    def _discard(self, worker: Worker) -> None:
        with self.lock:
            worker.close()
            if self.worker is worker:
                self.worker = None

    def close(self) -> None:
        """Stop the worker and its rebuild; none is started after this."""
        with self.lock:
            self.closed = True
            worker, self.worker = self.worker, None
        if worker is not None:
            worker.close()


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
