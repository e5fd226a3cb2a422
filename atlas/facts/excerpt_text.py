"""An excerpt's text as the pages cite it: its sha256, its code without comments, the lines that hold a
name or a call. Plain text work on the excerpts the facts carry: it never reads the installed
transformers (atlas.facts.sources does), so the render and check stages can use it.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from typing import Any


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def call_text(cls: str, part: str, qualname: str) -> str:
    """How running code calls a pinned part of ``cls``: a method of its own (``self._reshape(``), an
    autograd function's forward through its apply (``GeLUFunction.apply(``), a function of the file
    (``bloom_gelu_forward(``)."""
    if qualname == f"{cls}.{part}":
        return f"self.{part}("
    if qualname.endswith(".forward") and qualname.count(".") == 1:  # an autograd function's forward
        return qualname.removesuffix("forward") + "apply("
    return f"{part}("


SELF_CALL = re.compile(r"\bself\.(\w+)\(")


@cache  # the pages ask of the same few excerpts hundreds of times, and tokenizing is the slow part
def code_of(text: str) -> str:
    """An excerpt's code without its comments: what a page says an excerpt contains must be in the
    code itself, never only in a comment beside it (blanked in place, so line numbers hold)."""
    import io
    import textwrap
    import tokenize

    dedented = textwrap.dedent(text)
    lines = dedented.splitlines(keepends=True)
    try:
        comments = [tok for tok in tokenize.generate_tokens(io.StringIO(dedented).readline) if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return dedented
    for tok in reversed(comments):
        row, col = tok.start
        lines[row - 1] = lines[row - 1][:col] + " " * (tok.end[1] - col) + lines[row - 1][tok.end[1]:]
    return "".join(lines)


def lines_containing(ex: dict[str, Any], text: str) -> list[int]:
    """The file line numbers of an excerpt whose code holds ``text`` as a whole name (``self.weight``
    is not found in ``self.weight_scale``); none where the code never has it."""
    return [ex["start"] + i for i in _lines_holding(ex["text"], text)]


@cache  # a family's pages ask the same few questions of the same excerpts tens of thousands of times
def _lines_holding(excerpt_text: str, text: str) -> tuple[int, ...]:
    code = code_of(excerpt_text)
    if text not in code:
        return ()
    pattern = re.compile(re.escape(text) + (r"(?![A-Za-z0-9_])" if re.match(r".*\w$", text) else ""))
    return tuple(i for i, line in enumerate(code.splitlines()) if pattern.search(line))
