"""`python build.py ...` for the tests, started from a warm interpreter instead of a cold one.

Most of a test build's time is the interpreter importing torch, transformers and the field's libraries
(about 3 s on 2 cores) before build.py reads a line. Each pytest worker therefore keeps one helper
process that has imported them (and nothing of the atlas) and forks it per build; the fork runs build.py
as `python build.py` would: as __main__, in the project folder, with the argv, environment and signal
dispositions given, its own stdout and stderr, and its exit status or killing signal returned as
subprocess's. The atlas is imported afresh in each fork, from the project it runs in.

What a fork shares with its siblings is the hash seed of the helper, so a test that compares two builds
for byte equality starts each with `fresh=True`, a cold interpreter with a seed of its own."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

# Imported once by the helper: the heavy libraries a build imports, none of the atlas's modules.
WARM_IMPORTS = ("torch", "transformers", "transformers.modeling_utils", "safetensors", "nnsight", "nnterp",
                "transformer_lens")

HELPER = r"""
import importlib, json, os, runpy, signal, sys, traceback, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for name in sys.argv[1:]:
        try:
            importlib.import_module(name)
        except Exception:
            pass  # a library that cannot be imported here is imported (and fails) in the build, as cold
helper_path = list(sys.path)
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)  # the build and any workers it starts: one group the caller can stop
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            # transformers reads its verbosity when imported: read it now, from the build's environment
            # (build.py sets it to "error" where it is not set, before it imports transformers)
            verbosity = os.environ.get("TRANSFORMERS_VERBOSITY", "error")
            tl = sys.modules["transformers"].utils.logging if "transformers" in sys.modules else None
            if tl is not None and verbosity in tl.log_levels:
                tl.set_verbosity(tl.log_levels[verbosity])
            for fd, path in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_RDONLY) if fd == 0 else os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.stdin = open(0, closefd=False)
            sys.argv = list(request["argv"])
            sys.path[:] = [os.path.dirname(os.path.abspath(sys.argv[0]))] + helper_path[1:]
            code = 0
            try:
                runpy.run_path(os.path.abspath(sys.argv[0]), run_name="__main__")
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                if not isinstance(stop.code, (int, type(None))):
                    print(stop.code, file=sys.stderr)
            except KeyboardInterrupt:  # as python ends on one: the traceback, then killed by SIGINT
                traceback.print_exc()
                sys.stderr.flush()
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            except BaseException:
                traceback.print_exc()
                code = 1
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        except BaseException:
            os._exit(255)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class WarmBuilds:
    """One helper per process; `run` is subprocess.run for `[python, build.py, ...]`, with text output."""

    def __init__(self):
        self._helper = None
        self._pending = b""  # what the helper wrote past the last line read
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen:
        if self._helper is None or self._helper.poll() is not None:
            self._helper = subprocess.Popen([sys.executable, "-c", HELPER, *WARM_IMPORTS], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, cwd=tempfile.gettempdir())
            self._pending = b""
        return self._helper

    def _read(self, helper: subprocess.Popen, timeout: float | None) -> dict | None:
        """The helper's next line, or None after ``timeout`` seconds. Read from the pipe itself, with a
        buffer of our own: a buffered reader could hold both of a quick build's lines while select waits."""
        fd = helper.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the warm build helper exited")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, args: list[str], *, cwd, env=None, timeout: float | None = None) -> subprocess.CompletedProcess:
        with self._lock, tempfile.TemporaryDirectory() as held:
            out, err = os.path.join(held, "stdout"), os.path.join(held, "stderr")
            helper = self._started()
            request = {"argv": list(args), "cwd": os.fspath(cwd), "env": dict(os.environ if env is None else env),
                       "stdout": out, "stderr": err}
            helper.stdin.write((json.dumps(request) + "\n").encode())
            helper.stdin.flush()
            pid = self._read(helper, 600)["pid"]  # the first waits for the imports
            done = self._read(helper, timeout)
            if done is None:
                os.killpg(pid, signal.SIGKILL)
                self._read(helper, 60)
                raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
            with open(out, encoding="utf-8", errors="replace") as o, open(err, encoding="utf-8", errors="replace") as e:
                return subprocess.CompletedProcess([sys.executable, *args], done["status"], o.read(), e.read())


BUILDS = WarmBuilds()


def run(args: list[str], *, cwd, env=None, timeout: float | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """`python` with ``args`` (build.py first) in ``cwd``: forked from the warm helper, or a cold interpreter
    where ``fresh``."""
    if fresh:
        return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return BUILDS.run(args, cwd=cwd, env=env, timeout=timeout)
