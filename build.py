#!/usr/bin/env python3
"""Build the atlas: collect every fact, check every claim, render the pages, write the site.

    python build.py                      # every family into site/
    python build.py --family kimi_k2     # some families (repeatable); the others already built stay
    python build.py --weights DIR --family NAME   # also check a local checkpoint, tensor by tensor
    python build.py --list               # the families
    python build.py --serve [PORT]       # serve the site on 127.0.0.1
    python build.py pin ORG/REPO         # a checkpoint folder from the Hub's config and headers (atlas/pin.py)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from atlas import families
from atlas.errors import AtlasError


def build(names: list[str], out: Path, weights: Path | None = None) -> None:
    from atlas.check import check
    from atlas.facts import collect
    from atlas.schema import check_facts
    from atlas.site import render_family, write_site

    collected = [collect(name, weights) for name in names]  # collect: facts from models and checkpoints
    for name, family in zip(names, collected):  # the facts have the shape atlas/facts.schema.json gives them
        check_facts(family.facts, Path(out) / name / "facts.json")
    for family in collected:  # check: every claim against an independent source
        check(family)
    pages = {}  # render: pages from the facts alone
    for family in collected:
        pages.update(render_family(family.facts))
    write_site(out, pages, families.names())  # write: atomically, the old site stays on failure


def serve(out: Path, port: int) -> None:
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {out} at http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:])[:1] == ["pin"]:  # python build.py pin ORG/REPO: atlas/pin.py
        return __import__("atlas.pin", fromlist=["main"]).main((argv if argv is not None else sys.argv[1:])[1:])
    parser = argparse.ArgumentParser(description="Build the architecture atlas.")
    parser.add_argument("--family", action="append", metavar="NAME", help="build this family (repeatable); default: all")
    parser.add_argument("--out", type=Path, default=Path("site"), help="output folder (default: site)")
    parser.add_argument("--weights", type=Path, metavar="DIR", help="a local checkpoint directory to check (with one --family)")
    parser.add_argument("--list", action="store_true", help="list the families and exit")
    parser.add_argument("--serve", nargs="?", const=8000, type=int, metavar="PORT", help="serve the site on 127.0.0.1 after building")
    args = parser.parse_args(argv)

    known = families.names()
    if args.list:
        for name in known:
            print(name)
        return 0
    names = args.family or known
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"error: unknown family {unknown[0]!r}; known families: {', '.join(known)}", file=sys.stderr)
        return 2
    if args.weights is not None and len(names) != 1:
        print("error: --weights checks one family's checkpoint: give exactly one --family", file=sys.stderr)
        return 2
    try:
        build(list(dict.fromkeys(names)), args.out, args.weights)
    except AtlasError as e:
        print(f"error: {e}", file=sys.stderr)
        print(f"the site in {args.out} was left as it was", file=sys.stderr)
        return 1
    print(f"built {len(names)} famil{'y' if len(names) == 1 else 'ies'} into {args.out}/ (open {args.out}/index.html)")
    if args.serve is not None:
        serve(args.out, args.serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
