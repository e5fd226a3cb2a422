"""Evidence: pinned excerpts, each with the claim it supports and the code it must contain.

Every item names what it is cited for in ``contains``: the attributes a component's forward uses (the
tensors its proven steps read and the children they run, ``self.kv_a_proj_with_mqa``), a child's call
in its parent (``self.kv_b_proj(``), a tensor's creation (``self.weight``). Of a class's pinned
excerpts (its constructor, its forward and the methods the forward calls) the one whose code holds
the text is cited, and ``marks`` are the lines that hold it; where none does, the forward is cited
anyway, and atlas.check.claims fails the build naming the family, the page and the missing text.
"""

from __future__ import annotations

from typing import Any

from atlas.facts import excerpt_text
from atlas.render.pages.roles import role
from atlas.render.pages.titles import lowercase_title, title_of

FIELDS = ("path", "start", "end", "version", "sha256", "text", "qualname")


def excerpt(facts: dict[str, Any], cls: str, part: str) -> dict[str, Any] | None:
    ex = facts["excerpts"].get(cls, {}).get(part)
    if ex is None:
        return None
    return {k: ex[k] for k in FIELDS if k in ex}


def item(facts: dict[str, Any], direct: bool, claim: str, cls: str, part: str, contains: list[str]) -> dict[str, Any] | None:
    """One evidence item: the excerpt ``cls``.``part``, the claim, what it must contain and the lines
    that contain it. None where the class has no such excerpt (a torch class, an inherited forward)."""
    ex = excerpt(facts, cls, part)
    if ex is None:
        return None
    marks = sorted({n for text in contains for n in excerpt_text.lines_containing(ex, text)})
    return {"direct": direct, "claim": claim, "part": part, "class": cls, **ex, "contains": list(contains), "marks": marks}


def runs(facts: dict[str, Any], cls: str) -> list[str]:
    """The excerpts of a class that run on the forward pass: the forward, then the methods of its own
    that it calls (atlas.facts.sources pins them in that order)."""
    return [p for p in facts["excerpts"].get(cls, {}) if p != "__init__"]


def holding(facts: dict[str, Any], cls: str, text: str) -> str:
    """The running excerpt of ``cls`` whose code holds ``text``; the forward where none does (the check
    then names what is missing)."""
    parts = runs(facts, cls)
    found = next((p for p in parts if excerpt_text.lines_containing(facts["excerpts"][cls][p], text)), None)
    return found or "forward"


def _call_text(facts: dict[str, Any], cls: str, attribute: str) -> str:
    """How the code calls a child the steps run: ``self.model(``, or, where the child's own child is
    what the forward calls (OPT's ``self.model.decoder(``), ``self.model.``, or where the child is a list
    whose entries are called, ``self.mlps[``."""
    called = f"self.{attribute}("
    through = f"self.{attribute}."
    parts = runs(facts, cls)
    has = lambda text: any(excerpt_text.lines_containing(facts["excerpts"][cls][p], text) for p in parts)  # noqa: E731
    if not has(called) and not has(through) and has(f"self.{attribute}["):
        return f"self.{attribute}["  # an entry of a list of sublayers, called by its index (LongCat-Flash's self.self_attn[0](
    return through if not has(called) and has(through) else called


# The operation a measured variant performs, by the proof's fact and its value, where the code names it
# one way: the forward of a module the proof found to be a SiLU must say silu, an RMSNorm rsqrt.
OPERATIONS = {
    ("activation", "silu"): "silu", ("activation", "gelu_tanh"): "tanh", ("activation", "relu"): "relu",
    ("norm", "rms"): "rsqrt", ("norm", "rms_offset"): "rsqrt",
    ("routing", "sigmoid"): "sigmoid", ("routing", "sigmoid_renormalized"): "sigmoid",
    ("routing", "softmax"): "softmax", ("routing", "softmax_renormalized"): "softmax",
    ("routing", "sigmoid_renormalized_epsilon"): "sigmoid", ("routing", "softmax_renormalized_epsilon"): "softmax",
}


# Other spellings of an operation in code: the inverse square root as a power (Gemma 4's RMSNorm,
# torch.pow(mean_squared, -0.5)). The first one the running code holds is the one cited.
SPELLINGS = {"rsqrt": ("rsqrt", ", -0.5)")}


def written(facts: dict[str, Any], cls: str, op: str) -> str:
    """How the running code of ``cls`` writes operation ``op`` (``op`` itself where no spelling is found)."""
    parts = runs(facts, cls) if cls in facts["excerpts"] else []
    return next((text for text in SPELLINGS.get(op, (op,))
                 if any(excerpt_text.lines_containing(facts["excerpts"][cls][p], text) for p in parts)), op)


def operations(proof: dict[str, Any]) -> list[str]:
    """The operations of the proof's measured variants that the module's code must name."""
    return [OPERATIONS[(k, f["value"])] for k, f in proof["facts"].items() if isinstance(f["value"], str) and (k, f["value"]) in OPERATIONS]


def inherited_use(facts: dict[str, Any], cls: str, text: str) -> str:
    """What the code of ``cls`` holds for its use of ``text`` (``self.weight``): the text itself, or,
    where a class built on a torch module (PhimoeTopKRouter on Linear) never names a tensor its base
    creates and instead runs the base's forward, that call, ``super().forward(``."""
    if not facts["model"]["torch_bases"].get(cls) or text.endswith("("):
        return text
    parts = runs(facts, cls)
    if any(excerpt_text.lines_containing(facts["excerpts"][cls][p], text) for p in parts):
        return text
    call = "super().forward("
    return call if any(excerpt_text.lines_containing(facts["excerpts"][cls][p], call) for p in parts) else text


def uses(facts: dict[str, Any], cls: str, attributes: list[str], what: str, ops: list[str] = (), called: set[str] = frozenset()) -> list[dict[str, Any]]:
    """Direct evidence that ``cls`` runs ``what`` with these attributes of its own (the ``called``
    ones are children its steps run: their call, ``self.kv_b_proj(``) and operations: its forward, and
    each method of its own that holds some of them (with the forward's call of that method). An
    operation the running code leaves to a function its constructor picks (GELUTanh's
    ``approximate="tanh"``) is cited in the constructor."""
    by_part: dict[str, list[str]] = {"forward": []}
    for text in [_call_text(facts, cls, a) if a in called else f"self.{a}" for a in attributes]:
        text = inherited_use(facts, cls, text)
        if text not in by_part.get(holding(facts, cls, text), []):  # two weights read through one super().forward(
            by_part.setdefault(holding(facts, cls, text), []).append(text)
    init = facts["excerpts"].get(cls, {}).get("__init__")
    for op in ops:
        part = holding(facts, cls, op)
        running = facts["excerpts"].get(cls, {}).get(part)
        if running is not None and not excerpt_text.lines_containing(running, op) and init and excerpt_text.lines_containing(init, op):
            part = "__init__"
        by_part.setdefault(part, []).append(op)
    helpers = [p for p in by_part if p not in ("forward", "__init__")]
    _calls_through(facts, cls, by_part, helpers)
    forward = by_part["forward"] + [_call_of(facts, cls, p) for p in helpers if _holds(facts, cls, "forward", _call_of(facts, cls, p))]
    attrs = [t.rstrip("(") for t in forward if t.startswith("self.")]
    computes = [t for t in forward if not t.startswith("self.")]
    said = (f"; it uses {', '.join(attrs)}" if attrs else "") + (f"; it computes with {', '.join(computes)}" if computes else "")
    out = [item(facts, bool(forward), f"The forward pass of {cls}: {what}{said}.", cls, "forward", forward)]
    for part in helpers:
        texts = by_part[part]
        out.append(item(facts, True, f"{cls}.{part}, which the forward calls: it uses {', '.join(t.rstrip('(') for t in texts)}.", cls, part, texts))
    if by_part.get("__init__"):
        out.append(item(facts, True, f"The constructor of {cls} picks the function its forward applies: it names {', '.join(by_part['__init__'])}.", cls, "__init__", by_part["__init__"]))
    return [e for e in out if e]


def _call_of(facts: dict[str, Any], cls: str, part: str) -> str:
    return excerpt_text.call_text(cls, part, facts["excerpts"][cls][part].get("qualname", ""))


def _holds(facts: dict[str, Any], cls: str, part: str, text: str) -> bool:
    ex = facts["excerpts"].get(cls, {}).get(part)
    return ex is not None and bool(excerpt_text.lines_containing(ex, text))


def _calls_through(facts: dict[str, Any], cls: str, by_part: dict[str, list[str]], helpers: list[str]) -> None:
    """A part the forward reaches only through another (BLOOM's bloom_gelu_forward, called by the
    forward of the autograd function BloomGelu's forward applies): the call is cited in the part that
    makes it, which joins the helpers (in place), until the forward's own call is reached."""
    pending = [p for p in helpers if not _holds(facts, cls, "forward", _call_of(facts, cls, p))]
    while pending:
        target = pending.pop(0)
        call = _call_of(facts, cls, target)
        caller = next((p for p in runs(facts, cls) if p not in ("forward", target) and _holds(facts, cls, p, call)), None)
        if caller is None:
            continue
        by_part.setdefault(caller, [])
        if call not in by_part[caller]:
            by_part[caller].append(call)
        if caller not in helpers:
            helpers.append(caller)
            if not _holds(facts, cls, "forward", _call_of(facts, cls, caller)):
                pending.append(caller)


def called(proof: dict[str, Any], block_list: str | None = None, under: str = "") -> set[str]:
    """The attributes (of the module at ``under``, relative to the proof's) through which the proof's
    steps run a child: called in the forward, all but the block list, which the forward loops over."""
    prefix = under + "." if under else ""
    return {r[len(prefix):].split(".")[0] for r in proof["runs"] if r.startswith(prefix) and r != block_list}


def evidence(facts: dict[str, Any], node: dict[str, Any], parent: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Direct evidence: the component's own code, holding the attributes its proof uses. Contextual:
    its parent's code that builds it and calls it, holding the attribute and the call."""
    cls = node["class"]
    proof = facts["equations"]["components"].get(node["page_id"])
    ops = [written(facts, cls, op) for op in operations(proof)] if proof else []
    out = uses(facts, cls, proof["reads"], "the computation the equations above state", ops, called(proof)) if proof else []
    base = facts["model"]["torch_bases"].get(cls)
    built = [f"self.{c['name']}" for c in node["children"]] + ([] if base else [f"self.{t['name']}" for t in node["tensors"]])
    if built:  # a constructor that creates nothing the page counts is no evidence of it
        out.append(item(facts, True, f"The constructor of {cls}: the parameters it creates, counted below; it sets {', '.join(built)}.", cls, "__init__", built))
    if base and node["tensors"]:
        names = ", ".join(t["name"] for t in node["tensors"])
        out.append(item(facts, True, f"The constructor of {cls} calls {base}'s, which creates {names}, counted below.", cls, "__init__", ["super().__init__("]))
    if parent is not None:
        is_block = role(node) == "block"
        attr = parent["name"] if is_block else node["name"]
        shown = f"self.{attr}[i]" if is_block else f"self.{attr}"
        what = "each block" if is_block else f"the {lowercase_title(title_of(node))}"
        out.append(item(facts, False, f"{parent['class']} builds {what} as {shown} with these arguments.", parent["class"], "__init__", [f"self.{attr}"]))
        is_called = proof is not None and not is_block
        text = f"self.{attr}(" if is_called else f"self.{attr}"
        named = any(excerpt_text.lines_containing(facts["excerpts"][parent["class"]][p], text) for p in runs(facts, parent["class"]))
        if not is_called and not is_block and not named:
            # built and counted, but the running code never names it (Mamba-2's act: the forward applies
            # the activation by name as a function): say so, without claiming a read that is not there
            out.append(item(facts, False, f"{parent['class']}'s forward never uses {shown}: the module is built, "
                            "and counted, but not run on the forward pass.", parent["class"], "forward", []))
            return [e for e in out if e]
        part = holding(facts, parent["class"], text)
        verb = "calls" if is_called or is_block else "reads"
        where = "'s forward" if part == "forward" else f".{part}, which its forward calls,"
        out.append(item(facts, False, f"{parent['class']}{where} {verb} {shown}: what goes in and where its output goes.", parent["class"], part, [text]))
    return [e for e in out if e]


def tensor_evidence(facts: dict[str, Any], owner: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A tensor's owner creates it (direct) and, where the proof reads it, its forward reads it."""
    cls = owner["class"]
    text = f"self.{name}"
    base = facts["model"]["torch_bases"].get(cls)
    if base:
        out = [item(facts, True, f"{cls}.__init__ calls {base}'s constructor, which creates {name} with this shape.", cls, "__init__", ["super().__init__("])]
    else:
        out = [item(facts, True, f"{cls}.__init__ creates {text} with this shape.", cls, "__init__", [text])]
    proof = facts["equations"]["components"].get(owner["page_id"])
    if proof and name in proof["reads"]:
        used = inherited_use(facts, cls, text)
        part = holding(facts, cls, used)
        verb = f"reads {text}" if used == text else f"reads {text} through {base}'s forward ({used.rstrip('(')})"
        out.append(item(facts, False, f"{cls}.{part} {verb}.", cls, part, [used]))
    return [e for e in out if e]
