"""Prove every component page's equations on the preview run, and say so in the facts."""

from __future__ import annotations

import re
from typing import Any

from atlas.errors import AtlasError
from atlas.model.precision import float64_run
from atlas.proof import stack as stacks
from atlas.proof import summaries
from atlas.proof import whole_model
from atlas.proof import rwkv
from atlas.proof.core import Call, Context, Part, note_called_entries, proven_run
from atlas.proof.kinds import chain_of, kind_of
from atlas.proof.steps import Chain


def slug(text: str) -> str:
    """A page id from a module or kind name (the pages' own rule)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def capture_calls(model, ids, every: dict[str, list[Call]] | None = None) -> dict[str, Call]:
    """Every module's first call on one forward pass of the prompt: its arguments and its output; and in
    ``every``, each call of a module shaped as a rotary one (called once per kind of block: Gemma 3's)."""
    import torch

    calls: dict[str, Call] = {}
    light = {id(m) for m in model.modules() if _holds_frequencies(m)}
    paths = {id(m): p for p, m in model.named_modules()}

    def keep(value):
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (tuple, list)):
            return type(value)(keep(v) for v in value)
        return value

    def hook(module, args, kwargs, output):
        path = paths[id(module)]
        if path not in calls:
            calls[path] = Call(keep(args), {k: keep(v) for k, v in kwargs.items()}, keep(output))
        if every is not None and id(module) in light:
            every.setdefault(path, []).append(calls[path] if len(every.get(path, ())) == 0 else
                                              Call(keep(args), {k: keep(v) for k, v in kwargs.items()}, keep(output)))

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    try:
        with torch.no_grad(), float64_run():  # as the preview ran: float64 throughout
            model(ids, attention_mask=torch.ones_like(ids))
    finally:
        for h in handles:
            h.remove()
    return calls


def _holds_frequencies(module) -> bool:
    """A module shaped as a rotary one: no parameters or children, only 1-D float buffers (its calls
    are all kept: Gemma 3's is called once per kind of block)."""
    import torch

    buffers = [b for _, b in module.named_buffers(recurse=False)]
    return (not list(module.children()) and not list(module.parameters(recurse=False)) and bool(buffers)
            and all(b.dim() == 1 and torch.is_floating_point(b) for b in buffers))


def _descendants(part: Part) -> list[Part]:
    out = [part]
    for name, _ in part.tiny.named_children():
        out += _descendants(part.child(name))
    return out


def _entries_beyond_preview(facts, full_blocks, tiny_blocks, seen: set[str], tiny_kinds) -> dict[str, str]:
    """Modules of a block at the checkpoint's sizes that the preview's block lacks: entries of a list longer there
    than in the tiny model, of which the run called one entry alone (Zamba2's adapters, one per use of a shared
    block), so these belong to other uses. Said as such on their pages; anything else missing is left to fail."""
    from atlas.proof.core import CALLED_ENTRY

    out = {}
    for kind in facts["block_kinds"]:
        kid, tiny_block = slug(kind["id"]), tiny_blocks[tiny_kinds[kind["id"]].indices[0]]
        for name, _ in full_blocks[kind["indices"][0]].named_modules():
            head, _, index = name.rpartition(".")
            try:
                listed = tiny_block.get_submodule(head) if head else None
            except AttributeError:  # inside an entry the preview lacks: said below, with the entry
                continue
            if f"{kid}.{name}" in seen or not index.isdigit() or listed not in CALLED_ENTRY:
                continue
            out[f"{kid}.{name}"] = (f"entry {index} of {head}: the adapter of another use of the shared block, which this block's forward "
                                    f"does not call (it calls entry {CALLED_ENTRY[listed]}); the preview's shorter list does not hold it")
            for sub, _ in full_blocks[kind["indices"][0]].get_submodule(name).named_modules():
                if sub:
                    out[f"{kid}.{name}.{sub}"] = f"inside entry {index} of {head}, which this block's forward does not call"
    return out


def equations(family, full_model, full_config, run, facts: dict[str, Any]) -> dict[str, Any]:
    from atlas.model import introspect
    from atlas.model.block_kinds import kinds_of_blocks
    from atlas.model.roles import find_roles

    tiny, tiny_config = run.model, run.config
    every: dict[str, list[Call]] = {}
    calls = capture_calls(tiny, run.ids, every)
    note_called_entries(tiny, calls)
    ctx = Context(family, full_config, tiny_config, calls, run.eager, run.eager.resolution,
                  declared={k: dict(v) for k, v in family.equations.items()}, every_call=every)
    block_path = facts["model"]["block_path"]
    _, full_blocks = introspect.find_block_list(full_model, introspect.num_blocks(full_config))
    _, tiny_blocks = introspect.find_block_list(tiny, introspect.num_blocks(tiny_config))
    tiny_kinds = {k.id: k for k in kinds_of_blocks(tiny_blocks, tiny_config)}
    where = f"family {family.name}"

    parts: list[Part] = []
    for row in facts["accounting"]["model"]["rows"]:
        ctx.page_ids[row["path"]] = slug(row["path"].split(".")[-1])
        parts += _descendants(Part(ctx.page_ids[row["path"]], row["path"], full_model.get_submodule(row["path"]), tiny.get_submodule(row["path"]), ctx))
    kind_of_block: dict[int, str] = {}
    for kind in facts["block_kinds"]:
        tiny_kind = tiny_kinds.get(kind["id"])
        if tiny_kind is None:
            raise AtlasError(where, f"block kind {kind['id']}", f"the preview model has no block of this kind (it has {', '.join(tiny_kinds)}), so its equations cannot be proven")
        kid = slug(kind["id"])
        rep = tiny_kind.indices[0]
        ctx.block_ids[kid] = rep
        parts += _descendants(Part(kid, f"{block_path}.{rep}", full_blocks[kind["indices"][0]], tiny_blocks[rep], ctx, rep, kind["attention_type"]))
        kind_of_block.update({i: kid for i in tiny_kind.indices})

    proven: dict[str, tuple[Part, Chain]] = {}
    not_called: dict[str, str] = {}
    for part in parts:
        if part.path not in ctx.calls:  # e.g. GPT-2's attn_dropout: its forward applies dropout as a function
            not_called[part.id] = f"{part.path.replace(block_path + '.', 'layers[i].', 1)} is not called on the forward pass"
            continue
        proven[part.id] = (part, chain_of(part))
    not_called.update(_entries_beyond_preview(facts, full_blocks, tiny_blocks, {p.id for p in parts}, tiny_kinds))
    by_id = {p.id: p for p in parts}
    rotary = [ctx.calls[f"{block_path}.{n}"].kwargs.get("position_embeddings") for n in range(len(tiny_blocks))]
    stack = stacks.Stack([ctx.chains[kind_of_block[n]] for n in range(len(tiny_blocks))], rotary, block_path, introspect.num_blocks(full_config))
    stack.halving = rwkv.halved_after(Part("model", "", full_model, tiny, ctx))
    # what else each block was handed that its chain reads by name (DeepSeek-V4's blocks: the mask, the positions, the ids)
    stack.extras = [{name: ctx.calls[f"{block_path}.{n}"].kwargs.get(argument) for name, argument, _ in stacks.BLOCK_EXTRAS}
                    for n in range(len(tiny_blocks))]
    first, last = ctx.calls[f"{block_path}.0"], ctx.calls[f"{block_path}.{len(tiny_blocks) - 1}"]
    ctx.call_overrides["blocks"] = Call((first.kwargs.get("hidden_states", first.args[0] if first.args else None),), {},
                                        last.output[0] if isinstance(last.output, tuple) else last.output)
    blocks_part = Part("blocks", block_path, full_model.get_submodule(block_path), tiny.get_submodule(block_path), ctx)
    proven["blocks"] = (blocks_part, stacks.blocks(blocks_part, stack))
    model_part = Part("model", "", full_model, tiny, ctx)
    roles = find_roles(tiny, introspect.num_blocks(tiny_config))
    proven["model"] = (model_part, whole_model.model(model_part, stack, roles))

    # what each child is used as: the name its parent's step gives its result ("Q", "g", "z" ...)
    used_as: dict[str, dict[str, str]] = {}
    for pid, (_, chain) in proven.items():
        for step in chain.steps:
            out = step.out if isinstance(step.out, str) else ",".join(step.out)
            if step.sub and step.sub not in used_as:
                parent = ctx.parts.get(pid)
                by_kind = parent.facts["kind"]["value"] if parent and "kind" in parent.facts else pid
                used_as[step.sub] = {"by": pid, "by_kind": by_kind, "as": out, "step": step.tex}
            elif step.sub and used_as[step.sub]["by"] == pid and out != used_as[step.sub]["as"] and "again" not in used_as[step.sub]:
                # the same child run by a later step of the same parent (nanochat's norm, before block 0 and after the last)
                used_as[step.sub]["again"] = {"as": out, "step": step.tex}
    feeds = _feeds(proven, ctx.block_ids)
    components = {}
    # the angles are the model's own steps where its chain computes them: no block is handed them as given
    rotary_proven = any(k.startswith("rotary") and str(f.get("how", "")).startswith("computed") for k, f in proven["model"][0].facts.items())
    # the deepest parts first: where a child's steps are wrong, the failure names the child's step
    for pid, (part, chain) in sorted(proven.items(), key=lambda item: -item[0].count(".") if item[0] not in ("blocks", "model") else 1):
        result, weights_read = proven_run(part, chain)
        facts_of = (ctx.parts.get(pid) or by_id.get(pid) or part).facts
        if not result["reproduced"]:
            declared = [f"{k} = {f['value']}" for k, f in facts_of.items() if f["how"].startswith("declared by the family")]
            said = f"; declared by the family: {', '.join(declared)}" if declared else ""
            # a choice none of whose variants reproduces: where each one first diverged
            said += "".join(f"; {k}: no variant reproduces the module: {text}" for k, text in ctx.divergences.get(pid, {}).items())
            raise AtlasError(where, f"component {pid}", f"step `{result['step']}` does not reproduce the module on the preview run ({result['why']}){said}")
        # the run recorded what each step reads: the summary takes in what it reads, and must then cut nothing
        summaries.close(chain)
        cut = summaries.dropped(chain)
        if cut:
            raise AtlasError(where, f"component {pid}", f"its summary drops a step it reads: {cut[0]}")
        folded = summaries.summary_tex(chain)
        unexercised = _not_exercised(part, chain)
        if unexercised:
            facts_of["not_exercised"] = {"value": ", ".join(f"step {k}" for k in unexercised),
                                         "how": "not exercised by the preview run: the module is reproduced with each of these steps left out, "
                                                "so the run does not show that it acts"}
        components[pid] = {
            "inputs": [{"symbol": i.symbol, "argument": i.argument, "what": i.what, "given": i.given and not (rotary_proven and i.argument == "position_embeddings"),
                        "position": _position(part, i.argument, n), "from": feeds.get(pid, {}).get(i.name)} for n, i in enumerate(chain.inputs)],
            # the module's own attributes the steps use: the tensors they read and the children they run
            "reads": _attributes(weights_read, chain),
            # the paths (relative to the module) of the children its steps run, in order
            "runs": list(dict.fromkeys(step.fn.child_name for step in chain.steps if getattr(step.fn, "child_name", None))),
            "steps": [{"tex": s.tex, "sub": s.sub if s.sub in proven else None, "summary": s.summary,
                       "summary_tex": folded.get(n), "expression": s.expression_built,
                       "values": list(s.value) if isinstance(s.value, tuple) else ([s.value] if s.value else [])}
                      for n, s in enumerate(st for st in chain.steps if st.fn is not None)],
            "facts": facts_of,
            "used_as": used_as.get(pid),
            "proof": {"error": float(f"{result['error']:.3g}"), "tolerance": float(f"{result['tolerance']:.3g}"), "compared": result["compared"],
                      "block": part.block},
        }
    # what every part is, called or not (a never-called dropout is still a dropout), for the pages' words
    kinds = {p.id: kind_of(p) for p in parts}
    kinds.update(blocks="blocks", model="model")
    steps = sum(len(c["steps"]) for c in components.values())
    return {
        "components": components,
        "not_called": not_called,
        "kinds": kinds,
        "total": {"components": len(components), "steps": steps, "reproduced": steps,
                  "largest_error": max(c["proof"]["error"] for c in components.values())},
    }



def _not_exercised(part: Part, chain: Chain) -> list[int]:
    """The number (from 1, as the page lists them) of each step that updates a value in place (a clamp, a cap, a mask, a scale: its results
    are names the chain already had) and that the chain still reproduces the module without: a feature
    the preview run does not make act."""
    import dataclasses

    from atlas.proof.core import reproduce

    defined = {i.name for i in chain.inputs}
    found = []
    shown = [s for s in chain.steps if s.fn is not None]  # the page numbers the steps it shows from 1
    for step in shown:
        outs = _outs(step)
        # an update (written x <- f(x)) of names the chain already had; dropout at inference is one by definition
        if all(o in defined for o in outs) and r"\leftarrow" in step.tex and "Dropout" not in step.tex:
            without = dataclasses.replace(chain, steps=[s for s in chain.steps if s is not step])
            if reproduce(part, without)["reproduced"]:
                found.append(shown.index(step) + 1)
        defined.update(outs)
    return found


def _outs(step) -> tuple[str, ...]:
    return step.out if isinstance(step.out, tuple) else (step.out,)


def _feeds(proven: dict[str, tuple[Part, Chain]], block_ids: dict[str, int]) -> dict[str, dict[str, dict[str, Any]]]:
    """What feeds each input of each component, read from the chain of the parent that runs it: the
    parent's earlier step that defined the name handed over (``step``: its index among the parent's
    steps, ``sub``: the sibling component that step runs, ``element``: which of its results), or the
    parent's own input (``input``: its argument). A block's input is the previous block's output, and
    the first block's the stack's input (``previous_block``)."""
    feeds: dict[str, dict[str, dict[str, Any]]] = {}
    for pid, (_, chain) in proven.items():
        steps = [st for st in chain.steps if st.fn is not None]
        for k, step in enumerate(steps):
            handed = getattr(step.fn, "child_inputs", None)
            if not step.sub or handed is None or step.sub in feeds:
                continue
            feeds[step.sub] = {}
            for child_input, name in handed.items():
                source: dict[str, Any] = {"by": pid}
                j = next((j for j in range(k - 1, -1, -1) if name in _outs(steps[j])), None)
                if j is not None:
                    outs = _outs(steps[j])
                    source.update(step=j, sub=steps[j].sub, element=outs.index(name) if len(outs) > 1 else None)
                else:
                    source["input"] = next((i.argument for i in chain.inputs if i.name == name), name)
                feeds[step.sub][child_input] = source
    for kid in block_ids:
        if kid in proven:
            feeds[kid] = {"x": {"by": "blocks", "input": "hidden_states", "previous_block": True}}
    return feeds


def _position(part: Part, argument: str, n: int) -> int:
    """Where ``argument`` stands among the module's forward arguments (the element a hook reads); an
    argument the forward names otherwise (torch's Linear calls it ``input``) is read by its place
    among the chain's inputs, as ``Part.argument`` reads it."""
    import inspect

    params = [p for p in inspect.signature(part.tiny.forward).parameters if p != "self"]
    return params.index(argument) if argument in params else n


def _attributes(weights_read: set[str], chain: Chain) -> list[str]:
    """The module's own attributes its steps use: the first part of every weight name they read, and
    every child a step runs (a child without weights, an activation, is named by its step)."""
    names = {w.split(".")[0] for w in weights_read}
    names |= {step.fn.child_name.split(".")[0] for step in chain.steps if getattr(step.fn, "child_name", None)}
    return sorted(n for n in names if not n.isdigit())
