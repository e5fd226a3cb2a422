"""Write the site: the built families' folders, the index, the compare pages and the static files,
assembled beside ``out`` and published in one atomic step (atlas/build/publish.py), so that a failed
or killed build leaves the previous site exactly as it was."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from atlas.build import publish
from atlas.check import visible_text
from atlas.check.pages import check_page_sizes
from atlas.errors import AtlasError
from atlas.facts import cache
from atlas.facts.schema import read_site_facts
from atlas.render import compare
from atlas.render.math import KATEX
from atlas.render.site import SEARCH_SCRIPT, render_index, render_search_data, site_entry

STATIC = Path(__file__).resolve().parents[2] / "static"


def write_site(out: Path, family_files: dict[str, str], known_families: list[str],
               entries: dict[str, dict[str, Any]] | None = None, written: Path | None = None) -> None:
    """Write the built families into ``out``, keeping the other families it already holds; ``entries``
    holds the site entries (``site_entry``) of the built families, where the build has them. A built
    family's files are either in ``family_files`` (path -> text) or, already written, in its folder
    under ``written`` (a ``publish.pages_folder``), which is moved into the site as it is.

    The new site is assembled beside ``out`` and exchanged with it in one atomic step, under a lock on
    the folder holding ``out``: a second build into the same folder waits, then starts from the first
    one's result, so neither loses the other's families; a build killed at any instant leaves the old
    site or the new one whole, and what it left beside them is removed by the next build.
    """
    shown = Path(out)
    out = publish.output_folder(shown)
    try:
        with publish.lock(out, shown):
            publish.remove_leftovers(out)
            staging = publish.staging_folder(out)
            try:
                publish.copy_previous(out, staging)
                publish.pause("copied")
                moved = sorted(p.name for p in written.iterdir()) if written is not None else []
                built = {rel.split("/", 1)[0] for rel in family_files} | set(moved)
                for name in sorted(built):
                    if (staging / name).is_dir():  # a rebuilt family's folder holds only this build's pages
                        shutil.rmtree(staging / name)
                for name in moved:
                    os.rename(written / name, staging / name)
                publish.write_files(staging, family_files)
                _copy_static(staging)
                present = _site_entries(staging, known_families, shown, built, entries or {})
                index = render_index(present, lambda rel: (staging / rel).is_file())
                visible_text.check_page("index.html", index)
                publish.fresh(staging / "index.html").write_text(index, encoding="utf-8")
                publish.fresh(staging / SEARCH_SCRIPT).write_text(render_search_data(present), encoding="utf-8")
                compare.write_pages(staging, [e["compare"] for e in present])  # compare/: pairs of near relatives, and any pair in the browser
                check_page_sizes(staging)  # every page the site will publish, kept families' included
                publish.pause("written")
                publish.replace(staging, out)
            finally:
                publish.discard(staging)
    except OSError as e:
        raise AtlasError("--out", str(shown), f"cannot write the site there ({e.strerror or e})") from None


def _site_entries(staging: Path, known: list[str], shown: Path, fresh: set[str], given: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The site entry of every family the staged site holds, in the order of ``known``: those given, and
    for the others their facts.json, read back and checked against atlas/facts/facts.schema.json (the ones
    kept from before too)."""
    read = read_site_facts(staging, [n for n in known if n not in given], shown, fresh)
    found = {**{f["family"]["name"]: cache.index_view(f, site_entry) for f in read}, **given}
    return [found[name] for name in known if name in found]


def _copy_static(staging: Path) -> None:
    """Our own CSS and scripts, and KaTeX's stylesheet and fonts from the installed npm package."""
    target = staging / "static"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(STATIC, target)
    katex = KATEX / "dist"  # the package that renders the equations (atlas.render.math)
    if not (katex / "katex.min.css").is_file():
        raise AtlasError("node_modules/katex", "dist/katex.min.css", "KaTeX's stylesheet is missing: run `npm ci` (make site does)")
    (target / "katex" / "fonts").mkdir(parents=True)
    # KaTeX's own stylesheet, byte for byte, and every font file it names: the woff2 that browsers load
    # and the woff and ttf fallbacks after it, so that no reference dangles.
    shutil.copyfile(katex / "katex.min.css", target / "katex" / "katex.min.css")
    # the page that compares any pair renders the steps of the pair picked in the browser
    shutil.copyfile(katex / "katex.min.js", target / "katex" / "katex.min.js")
    named = sorted(set(re.findall(r"url\((fonts/[^)]+)\)", (katex / "katex.min.css").read_text(encoding="utf-8"))))
    for ref in named:
        if not (katex / ref).is_file():
            raise AtlasError("node_modules/katex", f"dist/{ref}", "named by katex.min.css but missing: run `npm ci` (make site does)")
        shutil.copyfile(katex / ref, target / "katex" / ref)
