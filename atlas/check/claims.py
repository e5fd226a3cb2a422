"""Check: every claim a page will make, tested against an independent source. A failure stops the build.

Each check raises ``AtlasError`` naming the file (or family) and the figure that disagrees.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from atlas.facts import sources
from atlas.facts.collected import Collected
from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.facts.early_checks import check_local_headers, check_preview
from atlas.check.prose import check_family_words


def check(collected: Collected) -> None:
    facts = collected.facts
    name = facts["family"]["name"]
    check_accounting(name, facts["accounting"])
    check_checkpoint_totals(facts["checkpoint_check"])
    check_published(facts["checkpoint"]["repo"], facts["checkpoint"]["published"])
    for size in facts.get("sizes", []):  # each released size's files against its own pinned headers and the vendor's count
        check_checkpoint_totals(size["check"])
        check_published(size["repo"], size["published"])
    check_tensor_summary(facts["checkpoint_check"], collected.pinned_layout if collected.pinned_layout is not None else collected.layout)
    if collected.local_tensors is not None:
        check_local_headers(facts["checkpoint_check"]["local"]["directory"], collected.layout, collected.local_tensors)
    sources.verify([part for parts in facts["excerpts"].values() for part in parts.values()])
    check_preview(name, facts["preview"])
    check_support(name, facts["support"])
    check_notes(facts["notes"])
    check_equation_text(name, facts["equations"])
    check_family_words(facts)
    check_cost(name, facts["cost"], collected.pinned_layout if collected.pinned_layout is not None else collected.layout)


# --- parameter accounting --------------------------------------------------------------------------


def check_accounting(family: str, accounting: dict[str, Any]) -> None:
    """Components add up to their module, and blocks × instances plus the rest add up to the model."""
    for row in accounting["block_kinds"]:
        _check_tree(family, row["tree"])
    model = accounting["model"]
    outside = sum(r["parameters"] + r["stored_buffers"] for r in model["rows"])
    blocks = sum(b["total"] for b in model["blocks"])
    if outside + blocks != model["total"]:
        raise AtlasError(
            family, "parameter accounting",
            f"blocks ({grouped(blocks)}) and the rest ({grouped(outside)}) add up to {grouped(outside + blocks)}, "
            f"not the model's {grouped(model['total'])}",
        )


def _check_tree(family: str, node: dict[str, Any]) -> None:
    for child in node["children"]:
        _check_tree(family, child)
    for role, key in (("parameter", "parameters"), ("buffer", "stored_buffers")):
        parts = sum(t["elements"] for t in node["tensors"] if t["role"] == role) + sum(c[key] for c in node["children"])
        if parts != node[key]:
            raise AtlasError(family, f"parameter accounting of {node['path']}", f"its components give {grouped(parts)} {key}, the module has {grouped(node[key])}")


# --- what it costs to run -------------------------------------------------------------------------


def check_cost(family: str, cost: dict[str, Any], layout: list) -> None:
    """Each cost rule, applied to the tiny preview model, gives what the preview run measured (the
    values its cache held, the FLOPs counted for one more token, the active parameters counted another
    way); the FP8 and 4-bit formulas give the bytes the checkpoint's own quantized files store."""
    from atlas.cost.weights import scale_mismatches

    for c in cost["checks"]:
        if c["formula"] != c["measured"]:
            raise AtlasError(family, f"cost figure {c['figure']}",
                             f"the formula gives {grouped(c['formula'])}, the preview run measured {grouped(c['measured'])} ({c['how']})")
    wrong = scale_mismatches(layout)
    if wrong:
        raise AtlasError(family, "cost figure weights in memory", f"{wrong[0]}" + (f" (and {len(wrong) - 1:,} more)" if len(wrong) > 1 else ""))
    check_model_figure(family, cost)



def check_model_figure(family: str, cost: dict[str, Any]) -> None:
    """The model's FLOPs of a token never exceed what transformers' eager code runs for it, at any context
    the page offers (the model asks for no work the code skips); the summary is the figures at the
    default context, as the page computes them."""
    from atlas.cost.figures import contexts, figures, summary

    model, eager = cost["flops"]["model"]["kinds"], cost["flops"]["kinds"]
    if [(m["kind"], m["count"]) for m in model] != [(k["kind"], k["count"]) for k in eager]:
        raise AtlasError(family, "cost figure model FLOPs", "its block kinds are not the eager figure's")
    for context in contexts(cost):
        fig = figures(cost, context)
        if fig["model_flops"] > fig["flops"]:
            raise AtlasError(family, "cost figure model FLOPs", f"{grouped(fig['model_flops'])} at {grouped(context)} tokens, more than "
                                                                f"transformers' eager {grouped(fig['flops'])}")
    if cost["summary"] != summary(cost):
        raise AtlasError(family, "cost summary", "differs from the figures at the default context")


# --- the pinned checkpoint -------------------------------------------------------------------------


def check_published(repo: str, published: dict[str, Any] | None) -> None:
    """The vendor's counts agree with ours at the vendor's digits, or checkpoint.json says why they do not;
    a reason given where every figure agrees is a stale one."""
    if published is None:
        return
    where = f"atlas/checkpoints/{repo}/checkpoint.json"
    apart = [row for row in published["figures"] if not row["agrees"]]
    if apart and not published["differs"]:
        row = apart[0]
        raise AtlasError(where, f"published.{row['what']}",
                         f"says {row['figure']}, but the atlas counts {grouped(row['exact'])} parameters, {row['ours']} at those digits: "
                         f"give the reason they differ in published.differs")
    if published["differs"] and not apart:
        raise AtlasError(where, "published.differs", "gives a reason they differ, but every figure agrees with the atlas's count at its digits")


def check_checkpoint_totals(check: dict[str, Any]) -> None:
    """The predicted files equal checkpoint.json on every figure it pins: tensors, tensors and bytes by
    dtype, payload, weights, index size, and each file's tensors, header length and size. Figures it
    does not pin are listed as not checked, never passed; a header length the writer's unknown tensor
    order leaves open must lie within its bounds. Every figure that differs is named in the one error,
    each with its difference."""
    differing = [row for row in check["figures"] if row["checked"] and not _agrees(row)]
    if differing:
        first = differing[0]
        raise AtlasError(
            check["pinned_file"], f"safetensors.{first['key']}",
            "the model and config predict other figures than the checkpoint's headers: " + "; ".join(_difference(row) for row in differing),
        )


def _agrees(row: dict[str, Any]) -> bool:
    if row["bounds"] is not None:
        return row["bounds"][0] <= row["pinned"] <= row["bounds"][1]
    return row["predicted"] == row["pinned"]


def _difference(row: dict[str, Any]) -> str:
    if row["bounds"] is not None:
        return f"{row['figure']}: pinned {grouped(row['pinned'])}, outside {grouped(row['bounds'][0])} to {grouped(row['bounds'][1])}"
    if isinstance(row["predicted"], str) or isinstance(row["pinned"], str):
        return f"{row['figure']} {row['predicted']}, pinned {row['pinned']}"
    return f"{row['figure']} {grouped(row['predicted'])}, pinned {grouped(row['pinned'])} ({_signed(row['predicted'] - row['pinned'])})"


def check_tensor_summary(check: dict[str, Any], layout: list) -> None:
    """What a tensor page says the files store for it is the predicted layout's own tensors: every
    name its pattern stands for, with that dtype and shape; a tied tensor the layout does not hold."""
    predicted = {t.name: t for t in layout}
    for key, found in check.get("tensors", {}).items():
        for e in found["stored"]:
            names = _expanded(e["name"])
            if len(names) != e["count"]:
                raise AtlasError(check["pinned_file"], f"tensor {key}", f"{e['name']} stands for {len(names)} tensors, the page counts {e['count']}")
            for name in names:
                t = predicted.get(name)
                if t is None or t.dtype != e["dtype"] or list(t.shape) != e["shape"]:
                    held = f"{t.dtype} {list(t.shape)}" if t is not None else "no such tensor"
                    raise AtlasError(check["pinned_file"], f"tensor {key}", f"the page says {name} is stored as {e['dtype']} {e['shape']}; the predicted files hold {held}")
        if found["tied_to"] is not None and found["tied_to"] not in predicted:
            raise AtlasError(check["pinned_file"], f"tensor {key}", f"said to be stored as {found['tied_to']}, which the predicted files do not hold")


def _expanded(pattern: str) -> list[str]:
    """'experts.{0…383}.w' -> experts.0.w ... experts.383.w; '{1,3}' lists its indices."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if m is None:
        return [pattern]
    inner = m.group(1)
    if "…" in inner:
        a, b = inner.split("…")
        indices = range(int(a), int(b) + 1)
    else:
        indices = [int(i) for i in inner.split(",")]
    return [n for i in indices for n in _expanded(pattern[:m.start()] + str(i) + pattern[m.end():])]


def _signed(n: int) -> str:
    return f"+{grouped(n)}" if n > 0 else grouped(n)


# --- standard names and the preview run ------------------------------------------------------------

def check_support(family: str, support: dict[str, Any]) -> None:
    """Every standard name appears once, on its host."""
    from atlas.model.vocabulary import VOCABULARY

    listed = [(h["host"], v["name"]) for h in support["hosts"] for v in h["values"]]
    expected = [(v.host, v.name) for v in VOCABULARY if not v.extension or (v.host, v.name) in listed]
    if sorted(listed) != sorted(expected):
        missing = sorted(set(expected) - set(listed))
        raise AtlasError(family, "support", f"standard values not listed: {missing}")


ROOT = Path(__file__).resolve().parents[2]
PYTHON_LANGUAGES = ("python", "py", "python3", "py3", "pycon", "ipython", "ipython3")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")


def python_fences(text: str) -> list[tuple[int, str]]:
    """(line, info) of every fenced block whose info names python, found by a plain scan of the lines
    (CommonMark's fence rule: a fence closes on a line of the same character, at least as long)."""
    found, open_fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if open_fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                open_fence = m.group(1)
                info = m.group(2).strip()
                if info and info.split()[0].lower() in PYTHON_LANGUAGES:
                    found.append((number, info))
        elif m and m.group(1)[0] == open_fence[0] and len(m.group(1)) >= len(open_fence) and not m.group(2).strip():
            open_fence = None
    return found


CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_equation_text(family: str, equations: dict[str, Any]) -> None:
    r"""No step's TeX holds a control character: one there is a Python escape in a string that is not raw
    ("\text" written as "\t" and "ext"), which KaTeX would render as something the step never said."""
    for component, facts in equations["components"].items():
        for step in facts["steps"]:
            found = CONTROL.search(step["tex"])
            if found:
                raise AtlasError(family, f"equation step of {component}",
                                 f"its TeX holds the control character {found.group()!r} at {found.start()}: {step['tex']!r} "
                                 "(an escape such as \\t in a string that is not raw?)")


def check_notes(notes: dict[str, Any]) -> None:
    """Every python block in every notes file ran: the files are scanned again here, and each python
    fence must have its record, marked as run by the execution itself."""
    files = notes["files"]
    for block in notes["blocks"]:
        if block["file"] not in files:
            raise AtlasError(block["file"], f"python block (line {block['line']})", "recorded for a file the notes do not list")
    for file in files:
        recorded = {b["line"]: b for b in notes["blocks"] if b["file"] == file}
        fences = python_fences((ROOT / file).read_text(encoding="utf-8"))
        for line, info in fences:
            block = recorded.get(line)
            if block is None:
                raise AtlasError(file, f"python block (line {line})", f"did not run: no record of the ```{info} block")
            if block["ran"] is not True or not isinstance(block["output"], str):
                raise AtlasError(file, f"python block (line {line})", f"did not run: {block.get('why') or 'it is recorded as not run'}")
        stray = sorted(set(recorded) - {line for line, _ in fences})
        if stray:
            raise AtlasError(file, f"python block (line {stray[0]})", "recorded as run, but the file has no python block there")
