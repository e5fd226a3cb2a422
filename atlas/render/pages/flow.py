"""The model's flow, drawn above each family's block diagram: the embeddings, the blocks, what follows
them and the logits, each step named by the standard value it produces."""

from __future__ import annotations

from typing import Any

from atlas.render.pages.roles import slug


def flow(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The model from input to output: embeddings, the blocks, what follows them, the logits."""
    n = facts["model"]["num_blocks"]
    at = {v["module"]: v["name"] for v in vals.values() if "output" in v["read_at"]}
    twice = {v["module"] for v in vals.values() if v["name"] == "embedding_norm_output"} & {v["module"] for v in vals.values() if v["name"] == "final_norm_output"}

    def listed(name: str) -> str | None:
        return name if name in vals else None

    before, after = [], []
    kinds = facts["equations"]["kinds"]  # what each module is, as the proof read it
    for row in facts["accounting"]["model"]["rows"]:
        name = row["path"].split(".")[-1]
        nid = slug(name)
        embedding = kinds.get(nid) == "embedding"
        if embedding:
            part = at.get(row["path"]) or (listed("token_embeddings") if not before else None)
        elif kinds.get(nid) in ("norm", "weightless_norm"):  # a gain or none (OLMo's final LayerNorm)
            # a norm on the embeddings before block 0 (BLOOM's) is drawn before the blocks, with its own value
            part = "embedding_norm_output" if at.get(row["path"]) == "embedding_norm_output" else listed("final_norm_output")
        else:
            part = listed("lm_head_output") if kinds.get(nid) == "linear" else None
        step = {"label": name, "sub": part or row["class"], "part": part, "link": nid if nid in known else None}
        if row["path"] in twice:  # one norm before block 0 and after the last (nanochat's): drawn at both
            before.append({**step, "sub": "embedding_norm_output", "part": "embedding_norm_output"})
        (before if embedding or part == "embedding_norm_output" else after).append(step)
    return before + [{"label": f"layers × {n}", "sub": "layer_output", "part": listed("layer_output"), "link": "blocks"}] + after + [
        {"label": "logits", "sub": "the output", "part": listed("logits"), "link": "model"}
    ]
