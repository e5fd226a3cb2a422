"""The warm worker of ``build.py --serve``: torch, transformers and the atlas imported once, and each
rebuild run in a child process forked from it.

    python -m atlas.build.serve_worker [FAMILY ...]   # as atlas/build/serve.py starts it, and talks to it on stdin/stdout

A fresh ``build.py`` spends most of a small rebuild importing torch and transformers. This process
pays that once: it imports them, the atlas's own modules and the transformers classes of the served
families, then forks one child per rebuild. The child runs ``build.main`` (the very command line a
fresh ``build.py --family NAME`` runs, so a rebuild checks, fails and publishes as any build does)
and exits; the worker itself never builds. Whatever a build keeps for the rest of its process (the
families loaded by name, the preview runs, the digest of the shared inputs, the Jinja environment,
the rendered equations) therefore starts empty in every rebuild, as in a fresh process. The family
modules are imported by each child and never kept here, so an edited family module is read afresh.
What the worker does hold is the code it imported (the ``imported`` list it reports): the server
replaces the worker when one of those files changes.

Forking after torch is imported is safe here for the reason atlas/build/parallel.py forks its own workers:
no tensor operation has run in this process, so there is no thread pool to copy half-made, and the
worker starts no threads. A rebuild of several families forks its pool from the child, likewise.

Each child leads a process group of its own, so that stopping a rebuild (its deadline passed, its
inputs changed again, the server stopped) ends the pool workers it forked too. At the deadline the
group is first asked for its Python stacks (faulthandler, on stderr), so that the server can name the
line that was still running. The worker ends its rebuild and itself when its stdin closes: a server
that died without stopping it leaves nothing running.

The channel, one JSON object per line. In: ``{"build": [names], "out": folder, "deadline": seconds}``,
and while a rebuild runs ``{"stop": true}``. Out: once ``{"ready": pid, "seconds": s, "imported":
[paths]}`` (or ``{"failed": "error: ..."}``, then exit), and for each build ``{"started": pid}`` then
``{"done": exit code, "stderr": text, "stopped": null | "deadline" | "asked", "inputs": {...}}``.
"""

from __future__ import annotations

import ctypes
import faulthandler
import importlib
import json
import os
import pkgutil
import select
import signal
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STACKS_SECONDS = 1.0  # how long a stopped rebuild is given to write its stacks before it is killed
STDERR_CAP = 1 << 20  # a rebuild's stderr kept for its error line; the rest is read and dropped
PRELOAD_SECONDS = 30  # for one family's module and transformers classes, imported ahead of its rebuilds


def family_modules() -> tuple[str, Path]:
    """The family modules' package name and folder, read from the registry itself wherever it lives."""
    from atlas import families

    return families.__name__, Path(families.__file__).resolve().parent


def family_dependencies(name: str) -> dict[str, list[str]]:
    """What a family's pages are built from (as the cache keys them), and the checkpoint folder, where
    a file added later belongs to the family too: read in the process that has just built it."""
    from atlas import families
    from atlas.facts import cache
    from atlas.inputs.checkpoint import CHECKPOINTS

    family = families.load(name)
    return {"files": [str(p) for p in cache.family_inputs(name)], "folders": [str(CHECKPOINTS / family.checkpoint)]}


def warm_up(served: list[str]) -> list[str]:
    """Import what rebuilds import, and return the project files this process now holds as code."""
    import torch  # noqa: F401
    import transformers.modeling_utils  # noqa: F401

    import atlas
    import build  # noqa: F401 - the rebuilds run its main

    package, _ = family_modules()
    not_preloaded = (f"{package}.", "atlas.build.serve", "atlas.build.watch", "atlas.build.pin", "atlas.build.hub")  # the server's own, and pin: no rebuild imports them
    for module in pkgutil.walk_packages(atlas.__path__, "atlas."):
        if not module.name.startswith(not_preloaded):
            importlib.import_module(module.name)
    from atlas import families
    from atlas.inputs.checkpoint import transformers_class

    previous = signal.signal(signal.SIGALRM, _too_long)
    try:
        for name in served:  # transformers imports a model's module when its class is first asked for
            signal.alarm(PRELOAD_SECONDS)  # a family module that loops must not keep the worker from being ready
            try:
                family = families.load(name)
                transformers_class(family, "config_class")
                transformers_class(family, "model_class")
            except Exception:  # noqa: BLE001 - the rebuild of that family names what is wrong
                pass
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    forget_family_modules()
    for warm in WARMERS:
        _warm(*warm)
    files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    imported = {Path(f).resolve() for f in files if isinstance(f, str) and os.path.isabs(f)}
    own = sorted(str(p) for p in imported if p.is_relative_to(ROOT) and ".venv" not in p.relative_to(ROOT).parts)
    # the installed packages, as far as the project can tell: torch and transformers, and KaTeX, whose
    # output the worker keeps (``learn_equations``)
    return own + [str(ROOT / "requirements.lock"), str(ROOT / "package-lock.json")]


# What the first rebuild in a fresh process computes the same way whatever the inputs, from the
# installed packages alone: computed once here, every child starts with it. (module, attribute, args);
# one that fails is left to the rebuilds, which are then slower.
WARMERS = (
    ("atlas.model.config_words.unread", "_shared_words", ()),  # every word of transformers' shared code (config keys not read)
    # the whole table (~1,000 regexes) is built on the first call, whichever model type it asks for
    ("transformers.conversion_mapping", "get_checkpoint_conversion_mapping", ("",)),
    ("torch._dynamo", None, ()),  # imported by the first call of a function torch marks as not compilable
)


def _warm(module: str, attribute: str | None, args: tuple) -> None:
    try:
        imported = importlib.import_module(module)
        if attribute is not None:
            getattr(imported, attribute)(*args)
    except Exception:  # noqa: BLE001 - a shortcut only: the rebuild computes it itself
        pass


def rendered_equations() -> dict:
    """The equations this process rendered (TeX -> KaTeX's HTML), as atlas.render.math keeps them."""
    from atlas.render import math

    return math._html


def learned_equations(known: set) -> list:
    """The equations this rebuild rendered that its worker did not know: KaTeX's HTML is a function of
    the TeX alone (and the pinned KaTeX), so the worker keeps it for the next rebuilds."""
    return [[tex, display, html] for (tex, display), html in rendered_equations().items() if (tex, display) not in known]


def learn_equations(learned: list) -> None:
    rendered_equations().update(((tex, display), html) for tex, display, html in learned)


def _too_long(signum, frame):
    raise TimeoutError("still importing")


def forget_family_modules() -> None:
    """Drop every family module this process imported, so that each rebuild imports them from disk."""
    from atlas import families

    families.load.cache_clear()
    for name in [m for m in sys.modules if m.startswith(f"{families.__name__}.")]:
        del sys.modules[name]
        if hasattr(families, name.rsplit(".", 1)[1]):  # ``from atlas.families import x`` reads the attribute first
            delattr(families, name.rsplit(".", 1)[1])


def failure_line(error: BaseException) -> str:
    """The worker's own import failure as one line: where in the project it happened."""
    if isinstance(error, SyntaxError) and error.filename:
        where = f"{_shown(error.filename)}:{error.lineno}"
    else:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if _shown(f.filename)]
        where = f"{_shown(frames[-1].filename)}:{frames[-1].lineno}" if frames else "atlas"
    text = " ".join(f"{type(error).__name__}: {error.msg if isinstance(error, SyntaxError) else error}".split())
    return f"error: the rebuild worker cannot import the atlas: {where}: {text}"


def _shown(filename: str) -> str | None:
    """A source file of the project as the project names it (atlas/render/site.py), or None for any other."""
    if not os.path.isabs(filename):  # code compiled by the atlas under a name of its own (a notes block)
        return filename if filename.startswith(("atlas/", "build.py")) else None
    path = Path(filename)
    if not path.is_relative_to(ROOT) or ".venv" in path.relative_to(ROOT).parts:
        return None
    return str(path.relative_to(ROOT))


def still_running(stacks: str) -> str | None:
    """The project line a stopped rebuild was running, from the stacks faulthandler wrote (most recent
    call first, one block per thread and process): in the process that did the work, not in one that
    waited for a pool's results."""
    found = []
    for block in stacks.split("\n\n"):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith('File "') and '", line ' in line:
                filename, _, rest = line[len('File "'):].partition('", line ')
                shown = _shown(filename)
                if shown:
                    found.append((shown, rest.split()[0]))
                    break
    inputs = str(family_modules()[1].relative_to(ROOT)) + "/"  # a family module or notes block: the user's own code
    waiting = ("build.py", "atlas/build/parallel.py")  # the build waiting for its pool
    chosen = [f for f in found if f[0].startswith(inputs)] or [f for f in found if f[0] not in waiting] or found
    return f"{chosen[0][0]}: line {chosen[0][1]}" if chosen else None


class Channel:
    """The worker's end of the pipes to the server."""

    def __init__(self, out_fd: int):
        self.out_fd = out_fd
        self.pending = b""
        self.closed = False

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.out_fd, data):]

    def lines(self) -> list[dict] | None:
        """The requests read by one read of stdin (which must be readable); None once it has closed."""
        data = os.read(0, 65536)
        if not data:
            self.closed = True
            return None
        self.pending += data
        *complete, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in complete if line.strip()]


def run_child(request: dict, err_w: int, res_w: int, closing: list[int], worker: int) -> None:
    """In the forked child: one rebuild by build.main, then what each rebuilt family depends on."""
    known = set(rendered_equations())
    try:
        os.setpgid(0, 0)
        _die_with(worker)
        for fd in closing:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(err_w, 2)
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        import build

        args = ["--out", request["out"]]
        for name in request["build"]:
            args += ["--family", name]
        try:
            code = build.main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        inputs = {}
        for name in request["build"]:
            try:
                inputs[name] = family_dependencies(name)
            except BaseException:  # noqa: BLE001 - a module that cannot be loaded: the server keeps watching its file
                inputs[name] = None
        learned = learned_equations(known)
        data = json.dumps({"inputs": inputs, "equations": learned}).encode("utf-8")
        while data:
            data = data[os.write(res_w, data):]
    except BaseException:  # noqa: BLE001 - whatever happened, the child must not return into the worker's loop
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(70)
    os._exit(code)


def _die_with(worker: int) -> None:
    """Have the kernel kill this child if the worker dies (Linux; elsewhere the server's stop does it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != worker:  # the worker died before the call above
        os._exit(70)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_build(request: dict, channel: Channel) -> None:
    """Fork the rebuild, pass on what it writes, stop it at its deadline or when asked, report it."""
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:
        run_child(request, err_w, res_w, [err_r, res_r, channel.out_fd], worker)
    try:
        os.setpgid(pid, pid)  # as the child does first thing: whichever runs first, a stop finds the group
    except OSError:
        pass
    os.close(err_w)
    os.close(res_w)
    channel.send({"started": pid})
    deadline_at = time.monotonic() + float(request["deadline"])
    kill_at = None
    stopped = None
    got = {err_r: bytearray(), res_r: bytearray()}
    open_fds = [err_r, res_r]
    while open_fds:
        now = time.monotonic()
        if stopped is None and now >= deadline_at:
            stopped, kill_at = "deadline", now + STACKS_SECONDS
            _kill_group(pid, signal.SIGUSR1)  # each process writes its Python stacks, then is killed
        if kill_at is not None and now >= kill_at:
            _kill_group(pid, signal.SIGKILL)
            kill_at = float("inf")
        wake = min(deadline_at if stopped is None else kill_at, now + 3600) - now
        readable, _, _ = select.select(open_fds + ([] if channel.closed else [0]), [], [], max(0.0, wake))
        for fd in readable:
            if fd == 0:
                requests = channel.lines()
                if requests is None or any(r.get("stop") for r in requests):
                    stopped = stopped or "asked"
                    _kill_group(pid, signal.SIGKILL)
                    kill_at = float("inf")
                continue
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
            elif fd != err_r or len(got[fd]) < STDERR_CAP:
                got[fd] += data
    os.close(err_r)
    os.close(res_r)
    _kill_group(pid, signal.SIGKILL)  # pool workers the rebuild left behind; its leader is not reaped yet
    _, status = os.waitpid(pid, 0)
    try:
        result = json.loads(got[res_r]) if got[res_r] else {}
    except ValueError:
        result = {}
    learn_equations(result.get("equations") or [])
    inputs = result.get("inputs") or {}
    stderr = got[err_r].decode("utf-8", "replace")
    channel.send({"done": os.waitstatus_to_exitcode(status), "stderr": stderr, "stopped": stopped,
                  "where": still_running(stderr) if stopped == "deadline" else None, "inputs": inputs})


def main(argv: list[str]) -> int:
    channel = Channel(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # what an import prints must not land in the channel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops the worker; a terminal's Ctrl-C is the server's
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    try:
        imported = warm_up(argv)
    except BaseException as e:  # noqa: BLE001 - an edit that breaks the atlas's import is reported as a rebuild's error
        channel.send({"failed": failure_line(e)})
        return 1
    channel.send({"ready": os.getpid(), "seconds": round(time.perf_counter() - start, 3), "imported": imported})
    while True:
        select.select([0], [], [])
        requests = channel.lines()
        if requests is None:
            return 0
        for request in requests:
            if "build" in request:
                run_build(request, channel)
                if channel.closed:
                    return 0


def run(argv: list[str]) -> None:
    code = main(argv)
    os._exit(code)  # as build.py does: tearing torch down at exit costs seconds and helps nothing


if __name__ == "__main__":
    run(sys.argv[1:])
