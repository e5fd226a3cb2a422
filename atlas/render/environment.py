"""The Jinja environment every page is rendered in: the templates, and the filters and globals they use
(numbers grouped, equations rendered, excerpts with their cited lines marked, cost figures)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from atlas.cost import figures as cost
from atlas.facts import cache
from atlas.numbers import binary_size, flops_scaled, grouped, short_count
from atlas.render.math import equation, font_mark

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def environment() -> jinja2.Environment:
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
    env.filters["binary_size"] = binary_size
    env.filters["flops_scaled"] = flops_scaled
    env.filters["short"] = short_count
    env.filters["month"] = _month
    env.filters["tex"] = lambda tex: markupsafe.Markup(equation(tex, True))
    env.filters["texi"] = lambda tex: markupsafe.Markup(equation(tex, False))
    env.filters["shape"] = _shape
    env.filters["excerpt_lines"] = excerpt_lines
    env.tests["is_heading"] = is_heading
    env.globals["page_href"] = page_href
    env.globals["font_mark"] = lambda root: markupsafe.Markup(font_mark(root))
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
