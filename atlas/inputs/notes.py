"""A family's notes: markdown whose numbers come from the facts and whose python blocks run.

Prose may name a fact as ``{{ config.raw.n_routed_experts }}`` (a dotted path into the facts; list
items by number); the build substitutes it, so no number in the notes is typed by hand. A path that
names no fact stops the build, naming the file and the path.

Every ```python block runs, in order and in one namespace, against the family's preview run. The
namespace holds only what a reader has after the setup the page shows first (``setup``): with the
released checkpoint, the family's class and tokenizer loaded from the Hub; in the build, the preview
run's tiny model and prompt; then, in both, the same ``atlas.model.trace`` lines. So a block may use
``torch``, ``atlas``, ``repo`` (the checkpoint's Hub id for a reader, its pinned folder with
config.json in the build), ``model``, ``ids``, ``t`` (the trace) and ``config`` (``model.config``),
and nothing else: a block that names anything more fails in the build, as it would for a reader. What a
block prints is shown under it. A block that raises stops the build.

Each block is recorded with whether it ran and what it printed. A fence that names python another
way (```py, ```python3, ```python skip) is not run, and is recorded as not run, with why:
``atlas.check.claims.check_notes`` then fails the build, since the page would show code that never ran.
"""

from __future__ import annotations

import contextlib
import html
import io
import re
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "atlas" / "families"
PYTHON_LANGUAGES = ("python", "py", "python3", "py3", "pycon", "ipython", "ipython3")  # fences that name python
SHARED_NAMES = ("torch", "atlas", "repo", "model", "ids", "t", "config")  # what both setups bind
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


def setup(facts: dict[str, Any], run) -> dict[str, str]:
    """The setup the notes' blocks start from, as code: ``checkpoint`` (a reader's, loading the released
    checkpoint; shown, not run: it needs the checkpoint's files), ``build`` (this build's, binding the
    same names to the preview run) and ``trace`` (run after either)."""
    name, repo = facts["family"]["name"], facts["checkpoint"]["repo"]
    cls = facts["model"]["class"]
    experts = (facts["preview"]["implementations"]["default"] or {}).get("experts") is not None
    eager = 'attn_implementation="eager"' + (', experts_implementation="eager"' if experts else "")
    remote = ", trust_remote_code=True" if "auto_map" in facts["config"]["raw"] else ""
    prompt = facts["preview"]["prompt"]
    checkpoint = (
        "import torch\n"
        "import atlas\n"
        f"from transformers import AutoTokenizer, {cls}\n\n"
        f'repo = "{repo}"\n'
        f"tokenizer = AutoTokenizer.from_pretrained(repo{remote})\n"
        f"model = {cls}.from_pretrained(repo, {eager})  # eager: every standard value is exposed\n"
        f'ids = tokenizer("{prompt}", return_tensors="pt").input_ids\n'
    )
    if run.weights is None:
        origin = (
            "from atlas.model.preview import preview_run\n\n"
            f'run = preview_run("{name}")  # the tiny model: seeded random weights, eager implementations\n'
        )
    else:
        origin = f"\n# run: the preview run on the local checkpoint {run.weights} (build.py --weights)\n"
    build = (
        "import torch\n"
        "import atlas\n"
        "from atlas.inputs.checkpoint import CHECKPOINTS\n"
        + origin
        + f'repo = str(CHECKPOINTS / "{repo}")  # the pinned config.json, no weights\n'
        "model, ids = run.model, run.ids  # the prompt as UTF-8 bytes: the tiny vocabulary is the 256 byte values\n"
    )
    trace = (
        "with torch.no_grad(), atlas.trace(model) as t:\n"
        "    model(ids)\n"
        "config = model.config\n"
    )
    return {"checkpoint": checkpoint, "build": build, "trace": trace}


def namespace(facts: dict[str, Any], run) -> dict[str, Any]:
    """The names the notes' blocks may use: what the build's setup and the trace lines bind, run here."""
    code = setup(facts, run)
    scope: dict[str, Any] = {"run": run}
    where = Path(f"atlas/families/{facts['family']['name']}.md")
    run_block(code["build"], scope, where, 0, 0)
    run_block(code["trace"], scope, where, 0, 0)
    # a reader with the checkpoint has no preview run: the blocks get only the names both setups bind
    return {k: v for k, v in scope.items() if k in SHARED_NAMES or k == "__builtins__"}


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
        text = substitute(read_notes(path, where), facts, where)
        tokens = md.parse(text)
        _check_prose(tokens, where)
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
    return {"files": [str(_shown(p)) for p in files], "html": _with_outputs(html_text, blocks), "blocks": blocks,
            "setup": setup(facts, run)}


def _check_prose(tokens, where: Path) -> None:
    """The notes' prose says none of the words a page shows only where a value went missing (None, null,
    undefined, NaN, atlas.check.visible_text): named here, at its line, not later as a page's fault."""
    from atlas.numbers import UNSAID

    for token in tokens:
        found = UNSAID.search(token.content) if token.type == "inline" else None
        if found:
            line = token.map[0] + 1 if token.map else 0
            raise AtlasError(where, f"line {line}", f'the prose says "{found.group(1)}", a word a page shows only where a value '
                                                    "went missing; write what it means instead (code in a ```python block may say it)")


def read_notes(path: Path, where: Path) -> str:
    """A notes file's text: UTF-8, or an error naming the file and the first byte that is not."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise AtlasError(where, f"byte {e.start}", "not UTF-8 text; save the notes as UTF-8") from None
    except OSError as e:
        raise AtlasError(where, None, f"cannot be read ({e.strerror})") from None


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
