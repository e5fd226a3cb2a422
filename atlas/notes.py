"""A family's notes: markdown whose numbers come from the facts and whose python blocks run.

Prose may name a fact as ``{{ config.raw.n_routed_experts }}`` (a dotted path into the facts; list
items by number); the build substitutes it, so no number in the notes is typed by hand. A path that
names no fact stops the build, naming the file and the path.

Every ```python block runs, in order and in one namespace, against the family's preview run:
``model`` (the tiny model, eager attention and experts), ``ids`` (the prompt, (1, seq)), ``config``
(the tiny config), ``pinned_config`` (the pinned checkpoint's config), ``facts``, ``atlas`` and
``torch``. What a block prints is shown under it. A block that raises stops the build.

Each block is recorded with whether it ran and what it printed. A fence that names python another
way (```py, ```python3, ```python skip) is not run, and is recorded as not run, with why:
``atlas.check.check_notes`` then fails the build, since the page would show code that never ran.
"""

from __future__ import annotations

import contextlib
import html
import io
import re
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "atlas" / "families"
PYTHON_LANGUAGES = ("python", "py", "python3", "py3", "pycon", "ipython", "ipython3")  # fences that name python
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.]+)\s*\}\}")


def notes_files(family) -> list[Path]:
    names = family.notes or (family.name,)
    return [FAMILIES / f"{name}.md" for name in names if (FAMILIES / f"{name}.md").is_file()]


def fact_at(facts: dict[str, Any], path: str):
    value: Any = facts
    for key in path.split("."):
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise KeyError(path)
    return value


def format_fact(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def substitute(text: str, facts: dict[str, Any], where: Path) -> str:
    def value(match: re.Match) -> str:
        try:
            return format_fact(fact_at(facts, match.group(1)))
        except KeyError:
            raise AtlasError(where, f"{{{{ {match.group(1)} }}}}", "names no fact of this family") from None

    return PLACEHOLDER.sub(value, text)


def namespace(facts: dict[str, Any], run) -> dict[str, Any]:
    import torch

    import atlas
    from atlas.checkpoint import load_pinned, transformers_config
    from atlas.families import load

    family = load(run.family)
    return {
        "atlas": atlas,
        "torch": torch,
        "model": run.model,
        "ids": run.ids,
        "config": run.config,
        "pinned_config": transformers_config(family, load_pinned(family.checkpoint)),
        "facts": facts,
    }


def run_block(code: str, scope: dict[str, Any], where: Path, number: int, line: int) -> str:
    """Run one python block in ``scope``; what it prints is returned. A failure names the block."""
    import torch

    out = io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order on every machine: the printed digits stay put
    try:
        with contextlib.redirect_stdout(out), torch.no_grad():
            exec(compile(code, f"{where}:python block {number}", "exec"), scope)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the notes are input: any failure is the notes' fault, named as such
        what = f"calls sys.exit({e.code!r}); a notes block must run to its end" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
        raise AtlasError(where, f"python block {number} (line {line})", what) from None
    finally:
        torch.set_num_threads(threads)
    return out.getvalue()


def family_notes(family, facts: dict[str, Any], run) -> dict[str, Any]:
    """facts["notes"]: the rendered html and every python block with what it printed."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    scope: dict[str, Any] | None = None
    blocks: list[dict[str, Any]] = []
    parts: list[str] = []
    files = notes_files(family)
    for path in files:
        where = _shown(path)
        text = substitute(path.read_text(encoding="utf-8"), facts, where)
        tokens = md.parse(text)
        for token in tokens:
            fence = token.info.strip() if token.type == "fence" else ""
            if not fence or fence.split()[0].lower() not in PYTHON_LANGUAGES:
                continue
            line = token.map[0] + 1 if token.map else 0
            block = {"file": str(where), "line": line, "fence": fence, "code": token.content, "ran": False, "output": ""}
            if fence == "python":
                if scope is None:
                    scope = namespace(facts, run)
                block["output"] = run_block(token.content, scope, where, len(blocks) + 1, line)
                block["ran"] = True  # reached only when the block ran to its end
            else:
                block["why"] = f"its fence says ```{fence}; only a ```python fence runs"
            blocks.append(block)
        parts.append(md.renderer.render(tokens, md.options, {}))
    html_text = "".join(parts)
    return {"files": [str(_shown(p)) for p in files], "html": _with_outputs(html_text, blocks), "blocks": blocks}


def _shown(path: Path) -> Path:
    """A notes file as the facts name it: relative to the project (atlas/families/x.md) where it is inside."""
    try:
        return path.resolve().relative_to(ROOT)
    except ValueError:
        return path


def _with_outputs(rendered: str, blocks: list[dict[str, Any]]) -> str:
    """Each python block's printed output, right under the block."""
    rendered_as_python = [b for b in blocks if b["fence"].split()[0] == "python"]  # class="language-python"
    pieces = rendered.split('<pre><code class="language-python">')
    out = [pieces[0]]
    for block, piece in zip(rendered_as_python, pieces[1:]):
        code, _, rest = piece.partition("</code></pre>\n")
        shown = f'<pre class="output" aria-label="printed">{html.escape(block["output"])}</pre>\n' if block["output"] else ""
        out.append('<pre><code class="language-python">' + code + "</code></pre>\n" + shown + rest)
    return "".join(out)
