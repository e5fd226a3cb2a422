"""The parts a proof walks: each component of the pages, beside its module in the tiny preview model.

A ``Part`` pairs the checkpoint-sized module (built on the meta device: its sizes write the TeX) with
the same module in the tiny model (its weights and the call it received on the preview run feed the
step functions). ``reproduce`` runs a chain on that call and compares the result, and every step
that names a standard value, with what the run recorded.
"""

from __future__ import annotations

import weakref

import fnmatch
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from atlas.proof.steps import Chain, Env, Step, run_chain

# Of the largest magnitude compared: float64 modules against float64 steps. The preview runs in float64
# throughout, transformers' own float32 casts widened too (atlas.model.precision), so what is left is
# float64 rounding, about 1e-16 a operation: the largest relative error over every family's proof is
# about 1e-13 (whole-model chains; BLOOM's GELU, whose module writes sqrt(2/pi) as 0.79788456, 5e-10).
# 1e-9 sits near float error, and far under what a dropped term or a wrong constant leaves (1e-6 and up).
RELATIVE_TOLERANCE = 1e-9


@dataclass
class Call:
    """What a module received and returned on the preview run (its first call)."""

    args: tuple
    kwargs: dict
    output: Any


@dataclass
class Context:
    """What every part of one family shares."""

    family: Any  # atlas.inputs.family.Family
    full_config: Any
    tiny_config: Any
    calls: dict[str, Call]  # tiny module path -> its first call on the run
    captured: Any  # the eager atlas.model.trace.Trace of the run (standard values)
    resolution: Any  # its atlas.model.resolver.Resolution
    declared: dict[str, dict[str, Any]] = field(default_factory=dict)  # {page-id glob: {feature: variant}}
    chains: dict[str, Chain] = field(default_factory=dict)  # built chains by page id
    page_ids: dict[str, str] = field(default_factory=dict)  # tiny module path -> page id, outside the blocks
    parts: dict[str, "Part"] = field(default_factory=dict)  # every part a chain was built for, by page id
    call_overrides: dict[str, Call] = field(default_factory=dict)  # calls of modules that have no forward
    block_ids: dict[str, int] = field(default_factory=dict)  # block-kind page id -> its tiny block
    # the run of each chain a choice kept, by id(chain): the proof need not run it again (see proven_run)
    chosen_runs: dict[int, tuple] = field(default_factory=dict)
    # every call of a module without tensors of its own (a rotary module called once per kind of block)
    every_call: dict[str, list[Call]] = field(default_factory=dict)
    # page id -> {feature: where each variant of a choice none of which reproduces first diverged}
    divergences: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Part:
    id: str  # the page id: "embed_tokens", "moe_block.self_attn", "model", ...
    path: str  # the module's path in the tiny model
    full: Any  # the module at the checkpoint's sizes (meta)
    tiny: Any  # the module in the preview model
    ctx: Context
    block: int | None = None  # the tiny block the module sits in, for standard values
    attention_type: str | None = None  # of that block's kind
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def child(self, name: str) -> "Part":
        """The child module ``name`` (a dotted path from the model's root works too), as a part whose id
        is its page's: the family's page ids where the proof was told them, else this id + name."""
        path = f"{self.path}.{name}" if self.path else name
        return Part(self.ctx.page_ids.get(path, f"{self.id}.{name}"), path, self.full.get_submodule(name),
                    self.tiny.get_submodule(name), self.ctx, self.block, self.attention_type)

    def has(self, name: str) -> bool:
        return name in dict(self.tiny.named_children())

    @property
    def call(self) -> Call:
        return self.ctx.call_overrides.get(self.id) or self.ctx.calls[self.path]

    def argument(self, name: str, position: int | None = None):
        """The call's argument ``name``, passed by name or by position."""
        call = self.call
        if name in call.kwargs:
            return call.kwargs[name]
        params = [p for p in inspect.signature(self.tiny.forward).parameters if p != "self"]
        index = params.index(name) if name in params else position
        return call.args[index] if index is not None and index < len(call.args) else None

    def declared(self, feature: str):
        for pattern, features in self.ctx.declared.items():
            if fnmatch.fnmatchcase(self.id, pattern) and feature in features:
                return features[feature]
        return None

    def note(self, feature: str, value: Any, how: str) -> None:
        self.facts[feature] = {"value": value, "how": how}

    def choose(self, feature: str, variants: dict[str, Callable[[], Chain]], words: dict[str, str] | None = None) -> Chain:
        """The chain of the variant the family declares, else of the first variant that reproduces the
        module's call on the run (measured). Where none does, the first: its proof then fails by name."""
        declared = self.declared(feature)
        if declared is not None:
            if declared not in variants:
                from atlas.errors import AtlasError

                raise AtlasError(f"family {self.ctx.family.name}", f"equations[{self.id!r}].{feature}",
                                 f"{declared!r} is not one of {', '.join(variants)}")
            chain = variants[declared]()
            kept = dict(self.facts)
            # the alternatives run too: one that reproduces the module as well shows the run cannot tell them apart
            alike = [n for n, build in variants.items() if n != declared and reproduce(self, build())["reproduced"]]
            self.facts.clear()
            self.facts.update(kept)
            self.note(feature, declared, "declared by the family" + (
                f"; not exercised by the preview run: {' and '.join(alike)} reproduces the module as well" if alike else
                f" (the others diverge from the module on the preview run: {', '.join(n for n in variants if n != declared)})" if len(variants) > 1 else ""))
            return chain
        reproducing = {}
        notes = {}  # what each variant's build noted: the chosen one's notes are the ones kept
        runs = {}
        before = dict(self.facts)
        failed = {}  # variant -> (how far its chain ran before it diverged, the step, why)
        for name, build in variants.items():
            # each variant notes onto the facts as they were: a variant that was tried and dropped leaves
            # nothing behind (a nested choice of its own that no variant reproduced, on Nemotron-H's norm)
            self.facts.clear()
            self.facts.update(before)
            chain = build()
            notes[name] = dict(self.facts)
            reads: set[str] = set()
            result = reproduce(self, chain, reads)
            if result["reproduced"]:
                reproducing[name] = chain
                runs[name] = (result, reads)
            else:
                # how far it got: the values that agreed before its first divergence, then how small that divergence is
                failed[name] = ((result.get("agreed", 0), -result.get("relative", float("inf"))), result["step"], result["why"])
        if reproducing:
            name, chain = next(iter(reproducing.items()))
            self.ctx.chosen_runs[id(chain)] = (chain, _form(chain), self.path, self.block, self.call, *runs[name])
            self.facts.clear()
            self.facts.update(notes[name])
            others = [n for n in reproducing if n != name]
            diverging = f" (the others diverge from it: {', '.join(failed)})" if failed else ""
            how = ("checked on the preview run" if len(variants) == 1 else
                   f"measured: the only variant that reproduces the module on the preview run{diverging}" if not others else
                   f"not exercised by the preview run: every variant reproduces the module the same ({', '.join(reproducing)})" if not failed else
                   f"measured: reproduces the module on the preview run, as {' and '.join(others)} also does (the same values here){diverging}")
            self.note(feature, name, how)
            return chain
        # none reproduces: the variant that ran furthest before diverging is kept, so the proof's error names
        # the step that differs from the module, not an earlier step of a variant that fails sooner
        furthest = max(failed, key=lambda n: failed[n][0])
        each = "; ".join(f"{n} first diverges at `{step}`" for n, (_, step, _) in failed.items())
        self.facts.clear()
        self.facts.update(before)
        self.note(feature, furthest, "no variant reproduces the module on the preview run")
        self.ctx.divergences.setdefault(self.id, {})[feature] = each  # for the error, not the page: it holds TeX
        return variants[furthest]()


# --- running and comparing -------------------------------------------------------------------------


# a list of modules of which the run called one entry alone (Zamba2's adapters, one per use of a shared block) ->
# that entry's index; a weight named through "@use" in such a list is read from the entry its own call ran
CALLED_ENTRY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def note_called_entries(model, calls: dict) -> None:
    import torch

    for path, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 1:
            called = [i for i in range(len(module)) if f"{path}.{i}" in calls]
            if len(called) == 1:
                CALLED_ENTRY[module] = called[0]


def resolve_use(module, name: str) -> str:
    """``name`` with "@use" replaced by the index of the entry its list's call ran (see CALLED_ENTRY)."""
    if "@use" not in name:
        return name
    head, tail = name.split("@use", 1)
    return f"{head}{CALLED_ENTRY[module.get_submodule(head.rstrip('.'))]}{tail}"


def weights_of(module) -> Callable[[str], Any]:
    import torch

    named = {**dict(module.named_parameters(remove_duplicate=False)), **dict(module.named_buffers(remove_duplicate=False))}

    def get(name: str):
        name = resolve_use(module, name)
        if name not in named:
            raise KeyError(name)
        return named[name].detach().to(torch.float64)

    return get


def as64(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64) if value.is_floating_point() else value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(as64(v) for v in value)
    return value


def chain_inputs(part: Part, chain: Chain) -> dict[str, Any]:
    return {i.name: as64(part.argument(i.argument, n)) for n, i in enumerate(chain.inputs)}


def output_of(part: Part, chain: Chain):
    out = part.call.output
    if chain.output_element is not None or isinstance(out, (tuple, list)) or hasattr(out, "to_tuple"):  # GPT-1's blocks return lists
        out = out[chain.output_element or 0]
    return as64(out)


def difference(mine, reference, compare: str = "allclose") -> float:
    """The largest absolute difference; masked scores (-inf or the dtype's minimum) are compared as masked."""
    import torch

    mine, reference = as64(mine), as64(reference)
    if torch.is_complex(mine) or torch.is_complex(reference):  # complex rotary factors: compared as (real, imaginary) pairs
        if not (torch.is_complex(mine) and torch.is_complex(reference)):
            return float("inf")
        mine, reference = torch.view_as_real(mine.to(torch.complex128)), torch.view_as_real(reference.to(torch.complex128))
    if compare == "top_k":  # mine: scores; reference: the positions the module kept (a top-k of them, ties in any order)
        return top_k_violation(mine, reference) if mine.shape[:-1] == reference.shape[:-1] else float("inf")
    if mine.shape != reference.shape:
        if mine.numel() != reference.numel():
            return float("inf")
        mine = mine.reshape(reference.shape)
    if not mine.is_floating_point():
        return float((mine != reference).sum())
    masked_ref = reference < -1e30
    masked_mine = ~torch.isfinite(mine) | (mine < -1e30)
    if bool((masked_ref != masked_mine).any()):
        return float("inf")
    keep = ~masked_ref
    return float((mine[keep] - reference[keep]).abs().max()) if bool(keep.any()) else 0.0


def top_k_violation(scores, positions) -> float:
    """How far ``positions`` (batch, query, k) fall short of being a top-k of ``scores`` (batch, query,
    key): the largest amount by which a kept position scores below the k-th best score of its query,
    beyond the float tolerance, or infinity where a position repeats. 0 where they are a top-k."""
    import torch

    positions = positions.long()
    k = positions.shape[-1]
    if positions.sort(-1).values.diff(dim=-1).eq(0).any():
        return float("inf")
    visible = torch.isfinite(scores) & (scores > -1e30)
    # every visible position is kept where a query sees no more than k of them
    if bool((visible.gather(-1, positions).sum(-1) != visible.sum(-1).clamp(max=k)).any()):
        return float("inf")
    kth = scores.topk(k, dim=-1).values[..., -1:]
    chosen = scores.gather(-1, positions)
    finite = scores[visible]
    slack = RELATIVE_TOLERANCE * max(1.0, float(finite.abs().max()) if finite.numel() else 1.0)
    masked_kth = ~torch.isfinite(kth) | (kth < -1e30)
    short = torch.where(masked_kth, torch.zeros_like(chosen), (kth - chosen).clamp(min=0))  # past the visible ones: any
    return max(0.0, float(short.max()) - slack)


def tolerance(reference, compare: str = "allclose") -> float:
    import torch

    reference = as64(reference)
    if torch.is_complex(reference):
        reference = torch.view_as_real(reference.to(torch.complex128))
    if not reference.is_floating_point():
        return 0.0
    finite = reference[reference > -1e30]
    scale = float(finite.abs().max()) if finite.numel() else 1.0
    return RELATIVE_TOLERANCE * max(1.0, scale)


def captured_value(part: Part, name: str):
    """The run's value of standard ``name`` where it is read inside this part's module; None elsewhere."""
    trace, resolution = part.ctx.captured, part.ctx.resolution
    index = part.block if _block_host(name) else None
    if _block_host(name) and index is None:
        return None
    placement = resolution.at(name, index)
    module = placement.module
    if placement.read is None or module is None or not trace.has(name, index):
        return None
    inside = part.path == "" or module == part.path or module.startswith(part.path + ".")
    return trace.value(name, index) if inside else None


def _block_host(name: str) -> bool:
    from atlas.model.vocabulary import BY_NAME

    return BY_NAME[name].host != "model"


SLOT_VALUES = ("expert_weights", "expert_indices")


def _in_expert_order(names, mine: list, refs: list) -> None:
    """Routing slots put in expert order (in place), so two top-k choices listing the same experts in
    another order compare equal."""
    if "expert_indices" not in names or refs[names.index("expert_indices")] is None:
        return
    at = names.index("expert_indices")
    k = mine[at].shape[-1]
    mine_order = mine[at].reshape(-1, k).argsort(-1)
    ref_order = refs[at].reshape(-1, k).argsort(-1)
    for j, name in enumerate(names):
        if name in SLOT_VALUES and refs[j] is not None:
            mine[j] = mine[j].reshape(-1, k).gather(-1, mine_order)
            refs[j] = refs[j].reshape(-1, k).gather(-1, ref_order)


def _step_checks(part: Part, trail: list) -> list[tuple[Step, Any, Any]]:
    """(step, its result, the run's value) for every step that names a standard value the run captured
    or a module result it is compared with, in the order the steps ran."""
    checks: list[tuple[Step, Any, Any]] = []
    for step, value in trail:
        if step.value:
            names = step.value if isinstance(step.value, tuple) else (step.value,)
            mine = list(value) if isinstance(step.value, tuple) else [value]
            refs = [captured_value(part, n) if n else None for n in names]
            _in_expert_order(names, mine, refs)
            checks += [(step, m, r) for m, r in zip(mine, refs) if r is not None]
        reference = getattr(step.fn, "compare_with", None)  # a module's result on the run (the model's rotary module)
        if reference is not None:
            pairs = zip(value, reference) if isinstance(reference, (tuple, list)) else [(value, reference)]
            checks += [(step, m, r) for m, r in pairs]
    return checks


def _first_divergence(checks: list) -> tuple[Step, float, float] | None:
    """The first check, in the order the steps ran, whose error passes its tolerance."""
    for step, mine, ref in checks:
        err, tol = difference(mine, ref, step.compare), tolerance(ref, step.compare)
        if err > tol:
            return step, err, tol
    return None


def _unchecked_before(chain: Chain, trail: list, checks: list, failing: Step) -> list[Step]:
    """The steps that ran after the last step whose value agreed with the run and before ``failing``:
    none of them had a value of the run to compare, so the divergence lies in one of them or in
    ``failing`` itself."""
    agreed = {id(s) for s, _, _ in checks}
    ran = [s for s, _ in trail]
    end = next((k for k, s in enumerate(ran) if s is failing), len(ran))
    start = max((k for k in range(end) if id(ran[k]) in agreed), default=-1)
    return [s for s in ran[start + 1:end] if s.fn is not None and not s.heading]


def _where(chain: Chain, trail: list, checks: list, failing: Step) -> str:
    """Words that name the steps a divergence first seen at ``failing`` may lie in, where it is not only there."""
    unchecked = _unchecked_before(chain, trail, checks, failing)
    if not unchecked:
        return ""
    named = "; ".join(f"`{s.tex}`" for s in unchecked)
    return f"; no value of the run is compared between the last step that agreed and this one, so the first divergence is this step or one of: {named}"


def _agreed(checks: list, failing: Step) -> int:
    """How many compared values agreed with the run before ``failing``'s: how far the chain got."""
    return next((k for k, (s, _, _) in enumerate(checks) if s is failing), len(checks))


def _order(trail: list, step: Step) -> int:
    """Where ``step`` ran in the trail: checks are made in the order the steps ran, so the first that
    fails is the first step that diverges."""
    return next((k for k, (s, _) in enumerate(trail) if s is step), len(trail))


def _form(chain: Chain) -> tuple:
    """What a chain runs: its steps, inputs and outputs (a chain whose steps were added to after its
    run has another form)."""
    return tuple((id(s), id(s.fn)) for s in chain.steps), tuple(map(id, chain.inputs)), chain.output, chain.output_element, chain.output_values


def proven_run(part: Part, chain: Chain) -> tuple[dict[str, Any], set[str]]:
    """``reproduce(part, chain)`` and the weights its steps read: taken from the choice that kept the
    chain where it ran this very chain on this module's call (a run is a pure function of both)."""
    known = part.ctx.chosen_runs.get(id(chain))
    if known is not None:
        ran, form, path, block, call, result, reads = known
        if ran is chain and form == _form(chain) and (path, block) == (part.path, part.block) and call is part.call:
            return result, set(reads)
    reads: set[str] = set()
    return reproduce(part, chain, reads), reads


def reproduce(part: Part, chain: Chain, reads: set[str] | None = None) -> dict[str, Any]:
    """Run ``chain`` on the part's call; compare its output and every captured intermediate.

    Returns {"reproduced", "error" (largest absolute difference), "tolerance", "compared" (how many
    tensors), and where it fails, "step" (the TeX of the first step that does not reproduce) and "why"}.
    ``reads``, where given, collects the name of every weight the steps read (relative to the module,
    children's included: "kv_b_proj.weight").
    """
    weights = weights_of(part.tiny)
    if reads is not None:
        def weights(name: str, get=weights):
            reads.add(resolve_use(part.tiny, name))
            return get(name)
    env = Env(weights, chain_inputs(part, chain))
    trail: list[tuple[Step, Any]] = []
    try:
        result = run_chain(chain, env, trail)
    except Exception as e:  # a step that cannot run on the module's tensors does not reproduce it
        done = {id(s) for s, _ in trail}
        step = next((s for s in chain.steps if s.fn is not None and id(s) not in done), None)
        why = f"it cannot run: {type(e).__name__}: {e}"
        # an earlier step that already diverged is the one to name: the crash follows from it
        ran = _step_checks(part, trail)
        earlier = _first_divergence(ran)
        if earlier is not None:
            diverged, err, tol = earlier
            return {"reproduced": False, "error": err, "tolerance": tol, "compared": 0, "step": diverged.tex,
                    "agreed": _agreed(ran, diverged), "relative": err / max(tol, 1e-300),
                    "why": f"largest error {err:.3g} > tolerance {tol:.3g}{_where(chain, trail, ran, diverged)}; a later step then {why}"}
        return {"reproduced": False, "error": None, "tolerance": None, "compared": 0,
                "step": step.tex if step else "", "agreed": len(ran), "relative": float("inf"), "why": why}
    checks = _step_checks(part, trail)
    final = next(s for s in reversed(chain.steps) if s.fn is not None)
    reference = part.call.output
    if isinstance(chain.output, tuple) and isinstance(reference, tuple) and len(reference) < len(chain.output):
        # the module returns fewer tensors than the chain (another router's rule): it cannot be this chain
        return {"reproduced": False, "error": None, "tolerance": None, "compared": 0, "step": final.tex, "agreed": 0, "relative": float("inf"),
                "why": f"the chain gives {len(chain.output)} outputs, the module returned {len(reference)}"}
    if isinstance(chain.output, tuple):
        mine, refs = [as64(x) for x in result], [as64(reference[j]) for j in range(len(chain.output))]
        _in_expert_order(chain.output_values, mine, refs)
        checks += [(final, m, r) for m, r in zip(mine, refs)]
    else:
        checks.append((final, result, output_of(part, chain)))
    worst, scale_tol, failure, agreed = 0.0, 0.0, None, 0
    for step, mine, ref in checks:
        err, tol = difference(mine, ref, step.compare), tolerance(ref, step.compare)
        worst, scale_tol = max(worst, err), max(scale_tol, tol)
        if err > tol and failure is None:
            failure = (step, err, tol)
        agreed += failure is None
    if failure:
        step, err, tol = failure
        return {"reproduced": False, "error": err, "tolerance": tol, "compared": len(checks), "step": step.tex,
                "agreed": agreed, "relative": err / max(tol, 1e-300),
                "why": f"largest error {err:.3g} > tolerance {tol:.3g}{_where(chain, trail, checks, step)}"}
    return {"reproduced": True, "error": worst, "tolerance": scale_tol, "compared": len(checks)}
