"""A component's inputs: what feeds each one, a page for each, and the code where it is handed over.

What feeds an input is read from the proof (``facts["equations"]["components"][id]["inputs"][n]
["from"]``): the parent's chain hands the child a name that an earlier step of the parent defined
(the output of a sibling component, or a computation of the parent itself) or that is the parent's
own input, passed on (then what feeds the parent's input feeds this one). A block's input is the
previous block's output, and the first block's the stream entering the blocks. The model's own
inputs are its call's arguments.
"""

from __future__ import annotations

from typing import Any

from atlas.render.pages.evidence import holding, item


def input_id(nid: str, argument: str) -> str:
    return f"{nid}.in.{argument}"


def feeder(facts: dict[str, Any], nid: str, inp: dict[str, Any]) -> dict[str, Any]:
    """What feeds input ``inp`` of component ``nid``, one hop: {"kind": "output" (a sibling's output,
    ``id``, ``element``), "step" (the parent's own step ``tex``), "parent_input" (the parent's input
    ``argument``, with ``upstream``: what feeds that), "previous_block" (with ``first``: what feeds
    the first block) or "call" (the model's call argument)}; ``by`` is the parent whose chain hands it."""
    comps = facts["equations"]["components"]
    src = inp["from"]
    if src is None:
        return {"kind": "call", "argument": inp["argument"], "by": None}
    by = src["by"]
    if src.get("previous_block"):
        first = next((i for i in comps["blocks"]["inputs"] if i["argument"] == src["input"]), None) if "blocks" in comps else None
        return {"kind": "previous_block", "by": by, "first": feeder(facts, "blocks", first) if first else None}
    if "step" in src:
        step = comps[by]["steps"][src["step"]]
        values = step["values"]
        if src["element"] is not None:  # a step defining several names: the standard value of the one handed over
            values = values[src["element"]:src["element"] + 1] if len(values) > src["element"] else []
        if src["sub"]:
            return {"kind": "output", "id": src["sub"], "element": src["element"], "by": by, "tex": step["tex"], "values": values}
        return {"kind": "step", "id": by, "by": by, "tex": step["tex"], "values": values}
    upstream = next(i for i in comps[by]["inputs"] if i["argument"] == src["input"])
    return {"kind": "parent_input", "id": by, "by": by, "argument": src["input"], "upstream": feeder(facts, by, upstream)}


def origin(f: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first hop that is not a parent's input passed on: where the value was computed."""
    while f is not None and f["kind"] == "parent_input":
        f = f["upstream"]
    return f


def producers(facts: dict[str, Any], f: dict[str, Any] | None, kinds: list[str]) -> list[dict[str, str | None]]:
    """The pages of the modules that compute what ``f`` feeds, each with a note where it matters."""
    f = origin(f)
    if f is None or f["kind"] == "call":
        return [{"id": "model", "note": "the model's call argument"}]
    if f["kind"] == "output":
        note = f"element {f['element']} of its results" if f["element"] is not None else None
        return [{"id": f["id"], "note": note, "element": f["element"]}]
    if f["kind"] == "step":
        return [{"id": f["id"], "note": "computed by its own step"}]
    first = [{**p, "note": "for block 0" + (f": {p['note']}" if p["note"] else "")} for p in producers(facts, f["first"], kinds)]
    return first + [{"id": k, "note": "the previous block, for every later block"} for k in kinds]


def call_site(facts: dict[str, Any], nodes: dict[str, dict[str, Any]], nid: str) -> tuple[str | None, str, bool]:
    """(the class whose code calls the component, the attribute it calls it by, whether it is called
    as ``self.attr(``: all but the block list, which the forward loops over)."""
    node = nodes[nid]
    containers = facts["model"]["containers"]
    block_path = facts["model"]["block_path"]
    if node["role"] in ("block", "blocks"):
        owner, _, attr = block_path.rpartition(".")
        return containers.get(owner), attr, False
    parent_path, _, attr = node["path"].rpartition(".")
    if parent_path in containers:
        return containers[parent_path], attr, True
    return nodes[node["crumbs"][-1]["id"]]["class"], attr, True


def handover(facts: dict[str, Any], nodes: dict[str, dict[str, Any]], nid: str, f: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """The excerpts of the parent's code where ``f`` is handed to component ``nid``: the line calling
    ``nid`` and, where a sibling's output feeds it, the line calling that sibling; each text in the
    running excerpt (forward, or a method it calls) that holds it, with the forward's call of that method."""
    cls, attr, is_call = call_site(facts, nodes, nid)
    if cls is None:
        return []
    texts = [f"self.{attr}(" if is_call else f"self.{attr}"]
    feeders = [f["id"]] if f["kind"] == "output" else []
    if f["kind"] == "previous_block" and f["first"] is not None and origin(f["first"])["kind"] == "output":
        feeders.append(origin(f["first"])["id"])
    for sid in feeders:
        scls, sattr, scall = call_site(facts, nodes, sid)
        if scls == cls:
            texts.insert(0, f"self.{sattr}(" if scall else f"self.{sattr}")
    by_part: dict[str, list[str]] = {}
    for text in texts:
        by_part.setdefault(holding(facts, cls, text), []).append(text)
    for part in [p for p in by_part if p != "forward"]:
        by_part.setdefault("forward", []).append(f"self.{part}(")
    out = []
    for part, held in sorted(by_part.items(), key=lambda kv: kv[0] != "forward"):
        where = f"{cls}'s forward" if part == "forward" else f"{cls}.{part}, which its forward calls,"
        shown = ", ".join(t.rstrip("(") for t in held)
        out.append(item(facts, True, f"{where} hands over {what}: the marked lines ({shown}).", cls, part, held))
    return [e for e in out if e]


def words(facts: dict[str, Any], nodes: dict[str, dict[str, Any]], f: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``f`` as the hops a reader follows, each {text, id (a page) or None, tex or None}."""
    if f is None:
        return []
    def title(i: str) -> str:
        t = nodes[i]["title"] if i in nodes else i
        return "t" + t[1:] if t.startswith("The ") else t  # "the whole model" mid-sentence
    if f["kind"] == "call":
        return [{"text": f"the model's call argument {f['argument']}", "id": "model", "tex": None}]
    if f["kind"] == "output":
        of = f" (element {f['element']} of its results)" if f["element"] is not None else ""
        return [{"text": f"the output of {title(f['id'])}{of}", "id": f["id"], "tex": f["tex"]}]
    if f["kind"] == "step":
        return [{"text": f"computed by {title(f['id'])} itself", "id": f["id"], "tex": f["tex"]}]
    if f["kind"] == "parent_input":
        arg = f["argument"]
        page = input_id(f["id"], arg)
        hop = {"text": f"{title(f['id'])}'s own input {arg}, passed on unchanged", "id": page if page in nodes else f["id"], "tex": None}
        return [hop] + words(facts, nodes, f["upstream"])
    return [{"text": "the previous block's output (each block's input is the output of the one before it)", "id": None, "tex": None},
            {"text": "for block 0, the stream entering the blocks:", "id": "blocks", "tex": None}] + words(facts, nodes, f["first"])


def input_pages(facts: dict[str, Any], nodes: dict[str, dict[str, Any]], vals: dict[str, dict[str, Any]]) -> None:
    """A page for each input of each proven component that the run hands it (not a transformers
    helper's result taken as given): what it is, its shape, what feeds it, the standard value read
    there, and the lines of the parent's code that hand it over. The component's inputs link to it."""
    comps = facts["equations"]["components"]
    for nid in [n for n, node in nodes.items() if node["type"] == "component"]:
        node = nodes[nid]
        proof = comps.get(nid)
        if proof is None or nid == "model":
            continue
        handed = [i for i in proof["inputs"] if not i["given"]]
        for inp in handed:
            pid = input_id(nid, inp["argument"])
            f = feeder(facts, nid, inp)
            io_in = (node["io"] or {}).get("in", [])
            shown = next((x for x in io_in if x["symbol"] == inp["symbol"]), io_in[0] if io_in and inp is proof["inputs"][0] else None)
            if shown is not None:
                shown["link"] = pid
            title = f"{node['title']} input" + (f": {inp['argument']}" if len(handed) > 1 else "")
            hops = words(facts, nodes, f)
            read_here = [name for name, v in vals.items() if reads_input(facts, v, node, inp)]
            # the standard value the step that feeds it computes (attention_norm_output for the attention)
            read_here += [name for name in (origin(f) or {}).get("values", []) if name and name in vals and name not in read_here]
            what = inp["what"][:1].upper() + inp["what"][1:]
            nodes[pid] = {
                "id": pid, "type": "input", "title": title, "name": inp["argument"], "class": node["class"], "constructor": "",
                "path": node["path"], "where": f"{node['where']}({inp['argument']}=…)", "role": "input",
                "parameters": 0, "stored_buffers": 0, "instances": node["instances"], "instances_label": node["instances_label"],
                "crumbs": node["crumbs"] + [{"id": nid, "title": node["title"]}],
                "description": f"{what}: the argument {inp['argument']} of {node['title']}, fed by {hops[0]['text'] if hops else 'its caller'}.",
                "symbol": inp["symbol"], "dims": shown["dims"] if shown else None, "fed_by": hops, "feeder": f,
                "values_here": read_here, "receiver": nid,
                "equations": None, "io": None, "children": [], "tensors": [], "accounting": [],
                "evidence": handover(facts, nodes, nid, f, f"{inp['argument']} to {node['title']}") if f["kind"] != "call" else [],
            }


def reads_input(facts: dict[str, Any], v: dict[str, Any], node: dict[str, Any], inp: dict[str, Any]) -> bool:
    """Whether standard value ``v`` is read at this input of this component (in the blocks of its kind)."""
    read = v.get("read")
    if not read or read["kind"] != "input" or not v["module"]:
        return False
    if (read["element"] or 0) != inp["position"]:
        return False
    block_path = facts["model"]["block_path"]
    generic = v["module"].replace("{i}", "*")
    if generic.startswith(block_path + ".*"):
        rest = generic[len(block_path) + 2:]
        if not node["path"].startswith(block_path + "."):
            return False
        index, _, own = node["path"][len(block_path) + 1:].partition(".")
        kind_blocks = next((k["indices"] for k in facts["block_kinds"] if int(index) in k["indices"]), [])
        return ("." + own if own else "") == rest and bool(set(kind_blocks) & set(v["blocks"] or []))
    return generic == node["path"]
