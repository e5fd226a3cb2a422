"""Render and write: Jinja2 pages from the facts only, written atomically into the site folder.

The site is built in a temporary folder beside the target and exchanged with it in one atomic step
(atlas/build/publish.py), so a failed or killed build leaves the previous site exactly as it was.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import jinja2
import markupsafe

from atlas.build import cache, publish
from atlas.render import compare, pages, search
from atlas.cost import figures as cost
from atlas.model.sizes import routed_experts
from atlas.check import visible_text
from atlas.check.claims import check_pages
from atlas.errors import AtlasError
from atlas.render.math import KATEX, deferred, equation, fill
from atlas.numbers import grouped
from atlas.facts.schema import read_site_facts

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"


def facts_json(facts: dict[str, Any]) -> str:
    """facts.json: stable key order (the order facts are collected in), UTF-8, newline-terminated;
    indented for reading, except arrays of numbers (shapes, preview data), each kept on one line."""
    return _dumps(facts, 0) + "\n"


def _dumps(value: Any, depth: int) -> str:
    kind = type(value)
    if kind is str:  # the commonest leaf, quoted as json.dumps(ensure_ascii=False) quotes it, without its setup
        return _quoted(value)
    if kind is int or (kind is float and math.isfinite(value)):  # json.dumps writes their repr
        return repr(value)
    if kind is list and _finite_numbers(value):  # shapes and preview data: written without an encoder each
        return "[" + ",".join(map(repr, value)) + "]"
    if _numeric(value) or not isinstance(value, (dict, list)) or not value:
        return _compact(value)
    inner, outer = "\n" + " " * (depth + 1), "\n" + " " * depth
    if isinstance(value, dict):
        items = [f"{_quoted(k)}: {_dumps(v, depth + 1)}" for k, v in value.items()]
        return "{" + inner + ("," + inner).join(items) + outer + "}"
    return "[" + inner + ("," + inner).join(_dumps(v, depth + 1) for v in value) + outer + "]"


_quoted = json.encoder.encode_basestring  # a str as JSON, non-ASCII kept (what ensure_ascii=False uses)
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps with these, made once


def _finite_numbers(values: list) -> bool:
    """A flat list of whole numbers and finite floats (the commonest list of numbers)."""
    kinds = set(map(type, values))
    return kinds <= _INT_FLOAT and (float not in kinds or all(map(math.isfinite, values)))


def _numeric(value: Any) -> bool:
    """A number, or a (nested) list holding only numbers."""
    if type(value) is list:  # exact types: facts are plain JSON values, and a bool is not a number here
        kinds = set(map(type, value))  # preview data is long lists: their elements' types, taken at C speed
        return kinds <= _NUMBER_TYPES or (kinds <= _NUMBERS_OR_LISTS and all(_numeric(v) for v in value if type(v) is list))
    return type(value) in _NUMBER_TYPES


_NUMBER_TYPES = frozenset({int, float, type(None)})
_NUMBERS_OR_LISTS = _NUMBER_TYPES | {list}
_INT_FLOAT = frozenset({int, float})


def _environment() -> jinja2.Environment:
    """One Jinja environment a process, so that each template is compiled once per build, not once per
    family (with the facts cache on, the compiled templates are also kept between builds)."""
    return _environment_with(cache.enabled())


@functools.lru_cache(maxsize=2)
def _environment_with(cache_enabled: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=cache.template_bytecode() if cache_enabled else None,  # compiling the templates is most of a no-op rebuild's rendering
    )
    env.filters["grouped"] = grouped
    env.filters["month"] = _month
    env.filters["tex"] = lambda tex: markupsafe.Markup(equation(tex, True))
    env.filters["texi"] = lambda tex: markupsafe.Markup(equation(tex, False))
    env.filters["shape"] = _shape
    env.filters["excerpt_lines"] = excerpt_lines
    env.tests["is_heading"] = is_heading
    env.globals["page_href"] = page_href
    env.globals.update(cost_figures=cost.figures, cost_checks=cost.check_words, contexts=cost.contexts)
    return env


def excerpt_lines(ex: dict[str, Any]) -> markupsafe.Markup:
    """An excerpt's text, verbatim, with the lines that hold what it is cited for marked."""
    return _marked_lines(ex["text"], ex["start"], frozenset(ex.get("marks") or ()))


@functools.lru_cache(maxsize=4096)  # a class's excerpt is shown on the page of every component of that class
def _marked_lines(text: str, start: int, marks: frozenset) -> markupsafe.Markup:
    out = []
    for n, line in enumerate(text.splitlines(keepends=True), start):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        escaped = markupsafe.escape(body)
        out.append((markupsafe.Markup('<mark class="hit">{}</mark>').format(escaped) if n in marks else escaped) + end)
    return markupsafe.Markup("").join(out)


def is_heading(tex: str) -> bool:
    """A step that only names the part of the computation that follows (\\text{Routing:})."""
    return tex.startswith("\\text{") and tex.endswith(":}")


def _shape(shape: list) -> str:
    """['batch', 'seq', 7168] -> '[batch, seq, 7,168]'."""
    return "[" + ", ".join(grouped(x) if isinstance(x, int) else str(x) for x in shape) + "]"


def page_href(node_id: str) -> str:
    """A component page's file, relative to the family folder."""
    return "index.html" if node_id == "family" else f"c/{node_id}.html"


MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def _month(released: str) -> str:
    """'2025-07' -> 'Jul 2025'."""
    year, month = released.split("-")
    return f"{MONTHS[int(month) - 1]} {year}"


def _view(facts: dict[str, Any]) -> dict[str, Any]:
    """``pages.site(facts)``, computed once for a family's pages and its site entry (the last family's kept)."""
    if _last_view[0] is not facts:
        _last_view[:] = [facts, pages.site(facts)]
    return _last_view[1]


_last_view: list[Any] = [None, None]


def render_family(facts: dict[str, Any]) -> dict[str, str]:
    """The files of one family's folder, by path relative to the site root: the family page, one page
    per component, tensor and standard value, and the facts."""
    name = facts["family"]["name"]
    env = _environment()
    view = _view(facts)
    check_pages(view, name)
    with deferred():  # the pages' equations are rendered together, after the pages
        files = {
            f"{name}/index.html": env.get_template("family.html").render(f=facts, v=view, root="../", data=page_data(view)),
            f"{name}/facts.json": facts_json(facts),
        }
        page = env.get_template("component.html")
        for node_id, node in view["nodes"].items():
            preview = preview_payload(facts, node.get("previews") or [])
            files[f"{name}/{page_href(node_id)}"] = page.render(f=facts, v=view, n=node, root="../../", fam="../", preview=preview)
    files = fill(files)
    visible_text.check_pages(files)  # no page says None
    return files


def preview_payload(facts: dict[str, Any], keys: list[str]) -> dict[str, Any] | None:
    """The preview tensors a value page draws, with the run's token labels."""
    if not keys:
        return None
    pv = facts["preview"]
    config = pv["config"]
    experts = routed_experts(config)
    return {"labels": pv["token_labels"], "experts": experts, "tensors": {k: pv["tensors"][k] for k in keys}}


def page_data(view: dict[str, Any]) -> dict[str, Any]:
    """What the family page's script needs: block kinds, the standard values' cards, the links."""
    return {
        "blocks": view["blocks"],
        "kinds": view["kinds"],
        "values": {
            k: {**{f: v[f] for f in ("name", "host", "layout", "dims", "shape", "description", "read_at", "module", "condition", "blocks")},
                "previewed": k in view["preview_values"]}
            for k, v in view["values"].items()
        },
    }


def render_index(entries: list[dict[str, Any]], page_exists: Callable[[str], bool] | None = None) -> str:
    """The index page from the families' site entries; with ``page_exists`` (a path relative to the site
    root -> whether the site has that page), every search entry is first checked to lead to a page."""
    cards = [e["card"] for e in entries]
    if page_exists is not None:
        for card in cards:
            search.check_targets(card["f"]["family"]["name"], card["v"]["search"], page_exists)
    return _environment().get_template("index.html").render(cards=cards, root="")


def site_entry(facts: dict[str, Any]) -> dict[str, Any]:
    """What the pages made from every family in the site need of one family: its index card (the facts
    the card shows, its block kinds, blocks and search entries) and its compare summary. A build
    computes it where it renders the family, and reads back only the facts.json of families it kept."""
    view = _view(facts)
    shown = {
        "family": facts["family"],
        "checkpoint": {"repo": facts["checkpoint"]["repo"]},
        "model": {"num_blocks": facts["model"]["num_blocks"]},
        "accounting": {"model": {k: facts["accounting"]["model"][k] for k in ("total", "active")}},
        **({"features": facts["features"]} if "features" in facts else {}),
    }
    return {"card": {"f": shown, "v": {"kinds": view["kinds"], "blocks": view["blocks"], "search": view["search"]}},
            "compare": compare.summary(facts)}


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
                compare.write_pages(staging, [e["compare"] for e in present])  # compare/: pairs of near relatives, and any pair in the browser
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
    named = sorted(set(re.findall(r"url\((fonts/[^)]+)\)", (katex / "katex.min.css").read_text(encoding="utf-8"))))
    for ref in named:
        if not (katex / ref).is_file():
            raise AtlasError("node_modules/katex", f"dist/{ref}", "named by katex.min.css but missing: run `npm ci` (make site does)")
        shutil.copyfile(katex / ref, target / "katex" / ref)
