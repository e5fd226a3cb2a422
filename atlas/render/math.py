"""KaTeX, rendered at build time: TeX in, HTML out, each distinct equation rendered once a process.

One rendering per equation: KaTeX's HTML only (its MathML copy doubled a page's weight in equations),
the HTML named by its TeX (``aria-label``) for assistive technology, since KaTeX hides it from them.

The renderer is the KaTeX that package-lock.json pins and ``npm ci`` installs, the same package whose
stylesheet and fonts the site copies, run by Node.js: one Node process per build process, started at
the first equation. A family's pages are rendered with a mark in place of each equation, and the
equations they hold are then rendered together, in one exchange with Node (``deferred`` and
``fill``): KaTeX on V8 takes a tenth of the time an embedded JavaScript interpreter takes, but only
when it is not asked one equation at a time. ``\\htmlClass`` colors the streams, so rendering trusts
that one command and is not strict about the HTML extension. A TeX error fails the build with the
equation named.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

from atlas.errors import AtlasError

KATEX = Path(__file__).resolve().parents[2] / "node_modules" / "katex"

# Reads a line holding a list of [tex, display], writes a line holding a list of {"html"} or {"error"}.
# It ends when its input does, that is when the build process that started it ends.
_RENDERER = r"""
const katex = require(process.argv[1]);
const lines = require("readline").createInterface({input: process.stdin});
lines.on("line", (line) => {
  const answers = JSON.parse(line).map(([tex, displayMode]) => {
    try {
      return {html: katex.renderToString(tex, {displayMode, output: "html", trust: true, strict: "ignore", throwOnError: true})};
    } catch (e) {
      return {error: String(e && e.message || e)};
    }
  });
  process.stdout.write(JSON.stringify(answers) + "\n");
});
"""

Equation = tuple[str, bool]  # (TeX, display mode)

_html: dict[Equation, str] = {}  # every equation this process rendered
_marked: list[Equation] = []  # the equation each mark stands for, by its number
_mark_of: dict[Equation, str] = {}
_met: list[Equation] | None = None  # while deferred: the equations met, in the order the pages met them
MARK = re.compile("\ue000(\\d+)\ue001")  # private-use characters, which no page text holds


def render(tex: str, display: bool = True) -> str:
    """One equation's HTML."""
    render_all([(tex, display)])
    return _html[(tex, display)]


def equation(tex: str, display: bool = True) -> str:
    """An equation's HTML, or while pages are rendered ``deferred``, a mark that ``fill`` replaces by it."""
    if _met is None:
        return render(tex, display)
    key = (tex, display)
    if key not in _mark_of:
        _mark_of[key] = f"\ue000{len(_marked)}\ue001"
        _marked.append(key)
    _met.append(key)
    return _mark_of[key]


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within: equations become marks (for ``fill``)."""
    global _met
    _met = met = []
    try:
        yield
    finally:
        _met = None
    render_all(met)  # the first equation that fails is the first the pages met


def fill(pages: dict[str, str]) -> dict[str, str]:
    """The pages with each mark replaced by its equation's HTML (rendered when ``deferred`` ended), and
    each page's font mark (``font_mark``) by preloads of the KaTeX fonts its equations use."""
    put = lambda m: _html[_marked[int(m.group(1))]]  # noqa: E731
    filled = {path: MARK.sub(put, text) if "\ue000" in text else text for path, text in pages.items()}
    return {path: FONT_MARK.sub(lambda m: preloads(text, m.group(1)), text) if "\ue002" in text else text for path, text in filled.items()}


# --- the fonts a page's equations use, fetched with its stylesheet ------------------------------------

FONT_MARK = re.compile("\ue002([^\ue003]*)\ue003")  # the site root of the page, between private-use characters
ON_OPEN = re.compile(r'<template class="on-open">.*?</template>', re.S)
_RULE = re.compile(r"([^{}]+)\{([^{}]*font-family:(KaTeX_\w+)[^{}]*)\}")


def font_mark(root: str) -> str:
    """A mark in a page's head that ``fill`` replaces by preloads of the fonts its equations use."""
    return f"\ue002{root}\ue003"


@functools.cache
def font_rules() -> tuple[tuple[frozenset[str], str], ...]:
    """(the classes a rule of KaTeX's stylesheet selects, the font file it sets them in), read from the
    stylesheet the site serves: which class needs which of the fonts is KaTeX's to say."""
    css = (KATEX / "dist" / "katex.min.css").read_text(encoding="utf-8")
    rules = []
    for selectors, body, family in _RULE.findall(css):
        if "@font-face" in selectors:
            continue
        bold, italic = "font-weight:700" in body or "font-weight:bold" in body, "font-style:italic" in body
        face = "BoldItalic" if bold and italic else "Bold" if bold else "Italic" if italic else "Regular"
        for selector in selectors.split(","):
            rules.append((frozenset(re.findall(r"\.([\w-]+)", selector)) - {"katex"}, f"{family}-{face}.woff2"))
    return tuple(rules)


def fonts_used(page: str) -> list[str]:
    """The woff2 files a page's equations need: KaTeX's upright face (its base), and each face a rule
    sets for classes the page's markup holds."""
    shown = ON_OPEN.sub("", page)  # a list rendered on opening loads its own fonts when it is opened
    classes = {c for attr in re.findall(r'class="([^"]*)"', shown) for c in attr.split()}
    found = {"KaTeX_Main-Regular.woff2"} if "katex" in classes else set()
    found.update(font for selected, font in font_rules() if selected and selected <= classes)
    return sorted(f for f in found if (KATEX / "dist" / "fonts" / f).is_file())


def preloads(page: str, root: str) -> str:
    """The fonts the page's shown equations use, listed for static/math-fonts.js, which fetches them early
    where the page is served (a preload link of its own would be refused on a page opened from disk)."""
    fonts = fonts_used(page)
    listed = " ".join(f"{root}static/katex/fonts/{f}" for f in fonts)
    return f'<meta name="atlas-math-fonts" content="{listed}"><script src="{root}static/math-fonts.js" async></script>' if fonts else ""


def render_all(equations: list[Equation]) -> None:
    """Render the equations not rendered yet, in one exchange; the first that KaTeX refuses fails the build."""
    new = [e for e in dict.fromkeys(equations) if e not in _html]
    if not new:
        return
    answers = _renderer().ask(new)
    for (tex, _), answer in zip(new, answers):
        if "error" in answer:
            raise AtlasError("equation", tex, f"KaTeX cannot render it: {answer['error']}")
    _html.update((key, labelled(answer["html"], key[0])) for key, answer in zip(new, answers))


HTML_CLASS = re.compile(r"\\htmlClass\{[^{}]*\}")


def label(tex: str) -> str:
    """What a screen reader is given for an equation: its TeX, without the stream colors' commands."""
    return " ".join(HTML_CLASS.sub("", tex).split())


def labelled(rendered: str, tex: str) -> str:
    """KaTeX's HTML output (one rendering, no MathML copy beside it, and marked aria-hidden by KaTeX)
    named for assistive technology by its TeX, as one image."""
    name = label(tex).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    return rendered.replace('<span class="katex">', f'<span class="katex" role="img" aria-label="{name}">', 1)


class _Node:
    def __init__(self):
        node = shutil.which("node")
        if node is None or not (KATEX / "package.json").is_file():
            missing = "Node.js (node on the PATH)" if node is None else "node_modules/katex (npm ci installs it; make site runs it)"
            raise AtlasError("equations", None, f"rendering them needs {missing}")
        self.pid = os.getpid()
        self.process = subprocess.Popen([node, "-e", _RENDERER, str(KATEX)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, encoding="utf-8")

    def ask(self, equations: list[Equation]) -> list[dict]:
        # Node reads the whole line before it writes its answer, so neither side waits on a full pipe.
        self.process.stdin.write(json.dumps(equations) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise AtlasError("equations", None, f"the KaTeX renderer (Node.js) ended with status {self.process.wait()}")
        return json.loads(line)


_process: _Node | None = None


def _renderer() -> _Node:
    """This process's renderer: a worker forked from a process that had one starts its own."""
    global _process
    if _process is None or _process.pid != os.getpid():
        _process = _Node()
    return _process
