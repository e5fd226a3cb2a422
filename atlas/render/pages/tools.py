"""The field's own tools on the pages: each value's access in nnsight, nnterp and TransformerLens, from
facts["tools"] (collected and checked on the preview run by atlas.model.tool_runs).

Three views: the support table's column (each library's access, or why it does not reach the value),
the libraries that cannot load the family (said once, on the family page), and each value page's
snippets, which put the checked access into code that loads the family's real checkpoint.
"""

from __future__ import annotations

import re
from typing import Any

ORDER = ("nnsight", "nnterp", "transformer_lens")


def tool_cells(facts: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The support table's column: value -> per library {title, accesses: [{text, where}], why}."""
    libraries = facts["tools"]["libraries"]
    cells = {}
    for name, by_library in facts["tools"]["values"].items():
        cells[name] = [{"library": lib, "title": libraries[lib]["title"],
                        "accesses": [{"text": a["text"], "where": _where(a["blocks"])} for a in by_library[lib]["accesses"]],
                        "why": by_library[lib]["why"], "quoted": by_library[lib]["quoted"]} for lib in ORDER]
    return cells


def unloaded(facts: dict[str, Any]) -> list[dict[str, str]]:
    """The libraries that do not load this family at all, with their own message."""
    return [{"title": lib["title"], "version": lib["version"], "message": lib["message"]}
            for key in ORDER if not (lib := facts["tools"]["libraries"][key])["loads"]]


def versions(facts: dict[str, Any]) -> list[dict[str, str]]:
    return [{"title": facts["tools"]["libraries"][key]["title"], "version": facts["tools"]["libraries"][key]["version"]}
            for key in ORDER]


def _where(blocks: list[int] | None) -> str:
    from atlas.model.block_kinds import index_ranges

    if blocks is None:
        return "on the model"
    return f"block{'s' if len(blocks) > 1 else ''} {index_ranges(blocks)}"


# --- snippets --------------------------------------------------------------------------------------


def snippets(facts: dict[str, Any], name: str, condition: str | None) -> list[dict[str, Any]]:
    """A value page's code per library: the checked access, at the first block it was checked at, in a
    script that loads the family's real checkpoint through the library; or why the library does not
    reach the value."""
    found = facts["tools"]["values"].get(name)
    if found is None:
        return []
    out = []
    for lib in ORDER:
        entry, library = found[lib], facts["tools"]["libraries"][lib]
        item = {"library": lib, "title": library["title"], "version": library["version"], "why": entry["why"], "quoted": entry["quoted"],
                "code": None, "checked": [{"text": a["text"], "where": _where(a["blocks"])} for a in entry["accesses"]]}
        if entry["accesses"]:
            first = entry["accesses"][0]
            block = first["blocks"][0] if first["blocks"] else None
            item["code"] = _script(lib, facts, _concrete(first["text"], block, facts), name, condition)
        out.append(item)
    return out


def _concrete(text: str, block: int | None, facts: dict[str, Any]) -> str:
    """A generic access at one block, its symbolic sizes written for one prompt of the real checkpoint."""
    if block is not None:
        text = text.replace("[i]", f"[{block}]").replace("{i}", str(block)).replace('cache[f"', 'cache["')
    heads = facts["config"]["standardized"].get("num_heads")
    return text.replace("(batch, seq)", "(1, -1)").replace("(num_heads, -1)", f"({heads}, -1)")


def _script(lib: str, facts: dict[str, Any], access: str, name: str, condition: str | None) -> str:
    repo = facts["checkpoint"]["repo"]
    prompt = facts["preview"]["prompt"]
    eager = [f'{knob}="eager"' for knob in ("attn_implementation", "experts_implementation")
             if condition and re.search(fr'\b{knob}="eager"', condition)]
    if lib == "nnsight":
        model_class = facts["model"]["class"]
        options = "".join(f", {e}" for e in eager)
        return (f"from nnsight import LanguageModel\nfrom transformers import {model_class}\n\n"
                f'model = LanguageModel("{repo}", automodel={model_class}, dispatch=True{options})\n'
                f"with model.trace({prompt!r}):\n    {name} = {access}.save()\nprint({name}.shape)")
    if lib == "nnterp":
        options = ", enable_attention_probs=True" if name == "attention_probabilities" else ""
        return (f"from nnterp import StandardizedTransformer\n\n"
                f'model = StandardizedTransformer("{repo}"{options})\n'
                f"with model.trace({prompt!r}):\n    {name} = {access}.save()\nprint({name}.shape)")
    return (f"from transformer_lens.model_bridge import TransformerBridge\n\n"
            f'bridge = TransformerBridge.boot_transformers("{repo}")\n'
            f"logits, cache = bridge.run_with_cache({prompt!r})\n{name} = {access}\nprint({name}.shape)")
