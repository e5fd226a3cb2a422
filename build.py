#!/usr/bin/env python3
"""Build the atlas: collect every fact, check every claim, render the pages, write the site.

    python build.py                      # every family into site/
    python build.py --family kimi_k2     # some families (repeatable); the others already built stay
    python build.py --weights DIR --family NAME   # also check a local checkpoint, tensor by tensor
    python build.py --list               # the families
    python build.py --serve [PORT]       # serve the site on 127.0.0.1
    python build.py pin ORG/REPO         # a checkpoint folder from the Hub's config and headers (atlas/build/pin.py)
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

from atlas import families
from atlas.facts.collected import Collected
from atlas.errors import AtlasError, one_line

# transformers' advice to its users (a rope setting renamed, an activation's numerics) is not the build's
# to pass on: whatever a page needs is checked, and a build prints only progress and its one error line.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore", module=r"transformers(\.|$)")  # its deprecation notices, likewise


def build(names: list[str], out: Path, weights: Path | None = None, *, use_cache: bool = True, jobs: int | None = None) -> bool:
    """Build ``names`` into ``out``; False when ``out`` already held exactly what it would write."""
    from atlas.inputs.preflight import check_inputs
    from atlas.build.publish import output_folder, pages_folder, tidy

    resolved = output_folder(out)  # refused now, not after a minute of collecting: --out that is not a folder
    for name in names:  # the inputs, before transformers is imported: a bad one ends the build at once
        check_inputs(name)
    if weights is not None:  # a local checkpoint's headers too, by the strict reader, before anything heavy
        from atlas.inputs.safetensors_headers import read_checkpoint

        read_checkpoint(weights)

    from atlas.facts import cache

    cache.enable(use_cache and weights is None)  # says so in a note, and stays off, where .atlas-cache cannot be used
    published = cache.published(out, names)
    if published is not None and published.up_to_date():  # the site holds what this build would write
        tidy(resolved)  # what a killed build left beside it goes all the same
        return False

    from atlas.build.parallel import collect_all, stderr_progress
    from atlas.build.site import write_site

    with pages_folder(resolved) as written:
        # collect, check, render and write the pages: each family in a worker process, its facts from
        # the cache where nothing changed; its pages go to a folder beside the site
        entries = collect_all(names, weights, jobs=jobs, use_cache=cache.enabled(), progress=stderr_progress,
                              then=functools.partial(checked_pages, out=out, written=written))
        # publish: the families' folders moved into the site, atomically; the old site stays on failure
        write_site(out, {}, families.names(), dict(zip(names, entries)), written)
    if published is not None:
        published.record()
    return True


def checked_pages(family: Collected, out: Path, written: Path) -> dict[str, Any]:
    """Write one family's pages under ``written``, rendered once its facts have passed every check, and
    return its entry in the pages made from every family (in the process that collected it)."""
    from atlas.facts import cache
    from atlas.check.claims import check
    from atlas.build.publish import write_files
    from atlas.facts.schema import check_facts
    from atlas.render.site import render_family, site_entry

    name = family.facts["family"]["name"]
    check_facts(family.facts, Path(out) / name / "facts.json")  # the facts have the shape atlas/facts/facts.schema.json gives them
    check(family)  # check: every claim against an independent source
    write_files(written, cache.rendered(name, family.facts, render_family, facts_text=family.facts_text))  # render: pages from the facts alone
    return cache.index_view(family.facts, site_entry)


def serve(out: Path, port: int, deadline: int | None = None) -> None:
    """Serve the site on 127.0.0.1, rebuilding a family when its inputs change: in a worker process that
    keeps torch and transformers imported, each rebuild stopped after ``deadline`` seconds."""
    from atlas.build import serve as server

    try:
        server.serve(out, port, watching=True, deadline=deadline or server.DEADLINE_SECONDS)
    except server.PortError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # a usage error is one line too, exit 2
        self.exit(2, f"error: {message} (python build.py --help lists the options)\n")


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:])[:1] == ["pin"]:  # python build.py pin ORG/REPO: atlas/build/pin.py
        return __import__("atlas.build.pin", fromlist=["main"]).main((argv if argv is not None else sys.argv[1:])[1:])
    parser = Parser(description="Build the architecture atlas.")
    parser.add_argument("--family", action="append", metavar="NAME", help="build this family (repeatable); default: all")
    parser.add_argument("--out", type=Path, default=Path("site"), help="output folder (default: site)")
    parser.add_argument("--weights", type=Path, metavar="DIR", help="a local checkpoint directory to check (with one --family)")
    parser.add_argument("--list", action="store_true", help="list the families and exit")
    parser.add_argument("--serve", nargs="?", const=8000, type=int, metavar="PORT", help="serve the site on 127.0.0.1 after building")
    parser.add_argument("--rebuild-deadline", type=_positive, metavar="SECONDS",
                        help="with --serve: stop a rebuild still running after this many seconds (default 300)")
    parser.add_argument("--no-cache", action="store_true", help="collect and render every family afresh, ignoring .atlas-cache/")
    parser.add_argument("--jobs", type=_positive, metavar="N", help="collect in N worker processes (default: one per core)")
    args = parser.parse_args(argv)

    known = families.names()
    if args.list:
        for name in known:
            print(name)
        return 0
    names = args.family or known
    unknown = [n for n in names if n not in known]
    if unknown:
        return _fail(f"unknown family {unknown[0]!r}; known families: {', '.join(known)}", 2)
    if args.weights is not None and len(names) != 1:
        return _fail("--weights checks one family's checkpoint: give exactly one --family", 2)
    if args.serve is not None and not 0 <= args.serve <= 65535:
        return _fail(f"--serve: {args.serve} is not a port number (0 to 65535)", 2)
    if args.rebuild_deadline is not None and args.serve is None:
        return _fail("--rebuild-deadline bounds the rebuilds of --serve: give --serve too", 2)
    kept = f"the site in {args.out} was left as it was"
    try:
        with _terminated_as_interrupted():
            written = build(list(dict.fromkeys(names)), args.out, args.weights, use_cache=not args.no_cache, jobs=args.jobs)
    except AtlasError as e:
        full = _disk_full(e)
        return _fail(f"{full}; {kept}" if full else f"{e}; {kept}")
    except Terminated:
        return _fail(f"terminated; {kept}", 128 + signal.SIGTERM)
    except KeyboardInterrupt:
        return _fail(f"interrupted; {kept}", 130)
    except Exception as e:  # a bug of the atlas, not of the input: still one line, with where it happened
        full = _disk_full(e)
        if full:
            return _fail(f"{full}; {kept}")
        return _fail(f"internal error at {_innermost(e)}: {type(e).__name__}: {e}; {kept} (please report this)")
    families_built = f"{len(names)} famil{'y' if len(names) == 1 else 'ies'}"
    if written:
        print(one_line(f"built {families_built} into {args.out}/ (open {args.out}/index.html)"))
    else:
        which = names[0] if len(names) == 1 else f"these {families_built}"
        print(one_line(f"{args.out}/ is up to date: nothing {which} depend{'s' if len(names) == 1 else ''} on has changed since the last build wrote it"))
    if args.serve is not None:
        serve(args.out, args.serve, args.rebuild_deadline)
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)  # a newline in any name it echoes stays on this line
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the build's own process: it unwinds like Ctrl-C, so that what the build made
    beside the site (its pages folder, a staging folder) is removed on the way out."""


@contextlib.contextmanager
def _terminated_as_interrupted():
    builder = os.getpid()

    def stop(signum, frame):
        if os.getpid() != builder:  # a worker forked from the build dies of it, as it would have anyway
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _disk_full(error: BaseException) -> str | None:
    """"PATH: no space left on device ..." where a full disk (or quota) is what made the build fail,
    however the error was wrapped on its way up."""
    seen: BaseException | None = error
    chain: set[int] = set()
    while seen is not None and id(seen) not in chain:
        chain.add(id(seen))
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            if seen.filename is not None:
                where = seen.filename
            elif isinstance(error, AtlasError):  # what the atlas was writing when it wrapped the error
                where = f"{error.where}: {error.field}" if error.field else error.where
            else:
                where = "--out"
            return f"{where}: no space left on device (free some space, then build again)"
        seen = seen.__cause__ or seen.__context__
    return None


def _innermost(error: BaseException) -> str:
    """The deepest line of the atlas's own code (build.py, atlas/) that the error passed through."""
    import traceback

    root = Path(__file__).resolve().parent
    ours = (root / "atlas", root / "build.py")

    def relative(filename: str) -> Path | None:
        path = Path(filename).resolve()  # a symlinked .venv inside the project is not the atlas's code
        return path.relative_to(root) if any(path == p or path.is_relative_to(p) for p in ours) else None

    frames = traceback.extract_tb(error.__traceback__)
    own = [(f, relative(f.filename)) for f in frames if relative(f.filename)]
    frame, shown = own[-1] if own else (frames[-1], frames[-1].filename)
    return f"{shown}:{frame.lineno}"


if __name__ == "__main__":
    code = main()
    # A process that imported torch and transformers spends about 2 s tearing them down at exit, and
    # nothing needs it: every file is written and closed by now. Flush what was printed and end here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
