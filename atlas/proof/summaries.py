"""A component's summary is its chain folded, never cut.

The summary shows the steps marked ``summary``. Every name a summary step reads must be defined in
the summary: by an earlier summary step, as one of the chain's inputs (the page says what feeds each),
or folded into the step that reads it, which prints the expression that computed it in place of the
name (a step and its fold both built from expressions, atlas.proof.expr, so what is printed is what
ran). A summary that drops a step whose result it reads, or reads a name after a dropped step changed
it (a norm applied to q before the scores, a gate applied to the shared expert), is refused.

What a step reads is known from the run (``Step.reads``, recorded by run_chain), so ``check`` runs on
a chain the proof has already run.
"""

from __future__ import annotations

from typing import Any

from atlas.proof.steps import Chain, Step


def _writer(steps: list[Step], before: int, name: str) -> int | None:
    """The index of the last step before ``before`` that defines ``name`` (None: an input)."""
    return next((j for j in range(before - 1, -1, -1) if name in steps[j].outs), None)


def _reads(step: Step) -> set[str]:
    return set(step.expr.reads()) if step.expr is not None else set(step.reads)


def folds(steps: list[Step], i: int) -> dict[str, tuple[Any, dict]] | None:
    """What step ``i`` of a summary folds: each name it reads from a step left out of the summary, to that
    step's expression (with that step's own folds); None where it reads one it cannot fold (a step
    without an expression, itself or the one left out)."""
    out: dict[str, tuple[Any, dict]] = {}
    for name in sorted(_reads(steps[i])):
        j = _writer(steps, i, name)
        if j is None or steps[j].summary:
            continue
        if steps[i].expr is None or steps[j].expr is None or isinstance(steps[j].out, tuple):
            return None
        inner = folds(steps, j)
        if inner is None:
            return None
        out[name] = (steps[j].expr.expr, inner)
    return out


def dropped(chain: Chain) -> list[str]:
    """Each summary step that reads a value a step left out of the summary computed or changed, and
    cannot fold it: "`summary step` reads name from `dropped step`"; also the chain's output where a
    step after the last summary step changes it."""
    steps = [s for s in chain.steps if s.fn is not None]
    if not any(s.summary for s in steps):
        return []  # no summary marked: the page shows every step
    problems = []
    for i, step in enumerate(steps):
        if not step.summary or folds(steps, i) is not None:
            continue
        for name in sorted(_reads(step)):
            j = _writer(steps, i, name)
            if j is not None and not steps[j].summary:
                problems.append(f"the summary step `{step.tex}` reads {name}, which the step `{steps[j].tex}` "
                                f"{'changes' if _writer(steps, j, name) is not None else 'computes'} and the summary leaves out")
    outputs = chain.output if isinstance(chain.output, tuple) else (chain.output,)
    for name in outputs:
        j = _writer(steps, len(steps), name)
        if j is not None and not steps[j].summary:
            problems.append(f"the chain's output {name} comes from the step `{steps[j].tex}`, which the summary leaves out")
    return problems


def summary_tex(chain: Chain) -> dict[int, str]:
    """The TeX a summary prints for each summary step that folds a left-out step (by its index among the
    chain's steps that run): the step with the folded names written out."""
    steps = [s for s in chain.steps if s.fn is not None]
    out = {}
    for i, step in enumerate(steps):
        if step.summary and step.expr is not None:
            fold = folds(steps, i)
            if fold:
                out[i] = step.expr.tex(fold)
    return out


def close(chain: Chain) -> int:
    """Bring into the summary every step it cannot do without: the steps that compute or change a name a
    summary step reads and cannot fold, and the step that gives the chain's output, until none is left
    out. The summary stays the steps the chain marks, folded where they can be, plus what they read.
    Returns how many steps it brought in."""
    steps = [s for s in chain.steps if s.fn is not None]
    if not any(s.summary for s in steps):
        return 0
    brought = 0
    outputs = chain.output if isinstance(chain.output, tuple) else (chain.output,)
    while True:
        needed = {j for name in outputs for j in [_writer(steps, len(steps), name)] if j is not None}
        for i, step in enumerate(steps):
            if step.summary and folds(steps, i) is None:
                needed |= {j for name in _reads(step) for j in [_writer(steps, i, name)] if j is not None}
        missing = [j for j in sorted(needed) if not steps[j].summary]
        if not missing:
            return brought
        for j in missing:
            steps[j].summary = True
        brought += len(missing)
