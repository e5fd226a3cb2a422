"""The pages' data (atlas.render.pages) for Kimi K2, against the released config and SPEC §10."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from atlas.render import pages
from atlas.check.pages import check_pages
from atlas.render.pages.roles import anatomy
from atlas.render.math import render
from tests.conftest import tree_rows

ROOT = Path(__file__).resolve().parent.parent
RELEASED = json.loads((ROOT / "atlas/checkpoints/moonshotai/Kimi-K2-Instruct/config.json").read_text())

# SPEC §10, the reference truth.
TOTAL = 1_026_408_232_448
MOE_BLOCK = 17_059_365_248
DENSE_BLOCK = 497_500_160
ATTENTION = 101_124_096
EMBEDDING = 1_174_405_120


@pytest.fixture(scope="module")
def view(kimi):
    return pages.site(kimi)


def test_hierarchy_levels_and_breadcrumbs(view):
    nodes = view["nodes"]
    moe_attn = nodes["MoE_block.self_attn"]
    assert [c["id"] for c in moe_attn["crumbs"]] == ["model", "blocks", "MoE_block"]
    assert [c["title"] for c in moe_attn["crumbs"]][1:] == ["61 transformer blocks", "60 MoE blocks"]
    # sub-component and tensor below it
    assert nodes["MoE_block.self_attn.kv_b_proj"]["crumbs"][-1]["id"] == "MoE_block.self_attn"
    tensor = nodes["MoE_block.self_attn.kv_b_proj.weight"]
    assert tensor["type"] == "tensor"
    assert tensor["shape"] == [RELEASED["num_attention_heads"] * (RELEASED["qk_nope_head_dim"] + RELEASED["v_head_dim"]), RELEASED["kv_lora_rank"]]
    # every crumb and child points at a page that exists
    for node in nodes.values():
        for ref in node["crumbs"] + node["children"] + node["tensors"]:
            assert ref["id"] in nodes, (node["id"], ref["id"])


def test_accounting_matches_the_reference_truth(view):
    nodes = view["nodes"]
    assert nodes["model"]["parameters"] == TOTAL
    assert sum(r["parameters"] for r in nodes["model"]["accounting"]) == TOTAL
    assert nodes["MoE_block"]["parameters"] == MOE_BLOCK and nodes["MoE_block"]["instances"] == 60
    assert nodes["dense_block"]["parameters"] == DENSE_BLOCK and nodes["dense_block"]["instances"] == 1
    assert nodes["MoE_block.self_attn"]["parameters"] == ATTENTION
    assert nodes["embed_tokens"]["parameters"] == EMBEDDING == nodes["lm_head"]["parameters"]
    for node in nodes.values():
        if node["type"] == "component" and node["accounting"] and node["id"] not in ("model", "blocks"):
            assert sum(r["parameters"] for r in node["accounting"]) == node["parameters"], node["id"]
    assert nodes["embed_tokens.weight"]["calculation"] == "163,840 × 7,168 = 1,174,405,120"


def test_equations_carry_the_checkpoints_numbers(view):
    nodes = view["nodes"]

    def tex(nid, part="steps"):
        return " ".join(st["tex"] for st in nodes[nid]["equations"][part])

    router = tex("MoE_block.mlp.gate")
    assert rf"\operatorname{{top}}_{{{RELEASED['num_experts_per_tok']}}}" in router
    assert f"{RELEASED['routed_scaling_factor']:.4g}" in router
    assert f"{RELEASED['n_routed_experts']}" in router and r"\sigma(z)" in router  # sigmoid scoring, as config.json says
    attn = tex("MoE_block.self_attn")
    assert "0.1309" in attn  # SPEC §10: self_attn.scaling
    for size in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim"):
        assert f"{RELEASED[size]:,}".replace(",", "{,}") in attn
    for cls in ("st-q", "st-k", "st-v", "st-c"):
        assert rf"\htmlClass{{{cls}}}" in attn
    assert f"{RELEASED['hidden_size']:,}".replace(",", "{,}") in tex("MoE_block.input_layernorm")
    assert f"{RELEASED['intermediate_size']:,}".replace(",", "{,}") in tex("dense_block.mlp")
    assert "Router" in tex("MoE_block.mlp") and "Router" not in tex("dense_block.mlp")


def test_the_sizes_the_pages_show_are_config_jsons(kimi, view):
    """The latent ranks, the rotary width, the widths of the MLPs and the router's sizes, as the facts
    and the component pages carry them, each derived from config.json here."""
    c = RELEASED
    d, H, E = c["hidden_size"], c["num_attention_heads"], c["n_routed_experts"]
    q_lora, kv_lora, rope = c["q_lora_rank"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    qk, v = c["qk_nope_head_dim"] + rope, c["v_head_dim"]
    attention = {
        "self_attn.q_a_proj.weight": [q_lora, d],
        "self_attn.q_a_layernorm.weight": [q_lora],
        "self_attn.q_b_proj.weight": [H * qk, q_lora],
        "self_attn.kv_a_proj_with_mqa.weight": [kv_lora + rope, d],  # the latent and the shared rotary key
        "self_attn.kv_a_layernorm.weight": [kv_lora],
        "self_attn.kv_b_proj.weight": [H * (c["qk_nope_head_dim"] + v), kv_lora],
        "self_attn.o_proj.weight": [d, H * v],
        "input_layernorm.weight": [d],
        "post_attention_layernorm.weight": [d],
    }
    expected = {
        "dense_block": {**attention, "mlp.gate_proj.weight": [c["intermediate_size"], d], "mlp.down_proj.weight": [d, c["intermediate_size"]]},
        "MoE_block": {
            **attention,
            "mlp.gate.weight": [E, d],
            "mlp.gate.e_score_correction_bias": [E],
            "mlp.experts.gate_up_proj": [E, 2 * c["moe_intermediate_size"], d],
            "mlp.experts.down_proj": [E, d, c["moe_intermediate_size"]],
            "mlp.shared_experts.gate_proj.weight": [c["n_shared_experts"] * c["moe_intermediate_size"], d],
        },
    }
    for row in kimi["accounting"]["block_kinds"]:
        prefix = row["tree"]["path"] + "."
        in_facts = {node["path"][len(prefix):] + "." + t["name"]: t["shape"] for node in tree_rows(row["tree"]) for t in node["tensors"]}
        kind = {"dense block": "dense_block", "MoE block": "MoE_block"}[row["label"]]
        for path, shape in expected[kind].items():
            assert in_facts[path] == shape, (kind, path)
            assert view["nodes"][f"{kind}.{path}"]["shape"] == shape, (kind, path)
    values = {v["name"]: v for h in kimi["support"]["hosts"] for v in h["values"]}
    assert values["router_logits"]["shape"] == ["batch", "seq", E]
    assert values["expert_weights"]["shape"] == values["expert_indices"]["shape"] == ["batch", "seq", c["num_experts_per_tok"]]
    assert values["attention_queries"]["shape"] == ["batch", H, "seq", qk]


def test_every_equation_renders(view):
    count = 0
    for node in view["nodes"].values():
        eq = node.get("equations") or {}
        for tex in [st["tex"] for st in eq.get("steps", [])]:
            html = render(tex)
            assert 'class="katex' in html
            count += 1
        for item in (node.get("io") or {}).get("in", []) + (node.get("io") or {}).get("out", []):
            render(item["symbol"], False)
    assert count > 100


def test_named_dims(view):
    nodes = view["nodes"]
    d = RELEASED["hidden_size"]
    assert nodes["MoE_block"]["io"]["in"][0]["dims"] == f"[B batch, T positions, {d:,} d]"
    assert nodes["lm_head"]["io"]["out"][0]["dims"] == f"[B batch, T positions, {RELEASED['vocab_size']:,} vocab]"


def test_evidence_is_pinned_excerpts_with_claims(view, kimi):
    ev = view["nodes"]["MoE_block.self_attn"]["evidence"]
    direct = [e for e in ev if e["direct"]]
    contextual = [e for e in ev if not e["direct"]]
    assert {e["class"] for e in direct} == {"DeepseekV3Attention"}
    assert {e["class"] for e in contextual} == {"DeepseekV3DecoderLayer"}
    for e in ev:
        pinned = kimi["excerpts"][e["class"]][e["part"]]
        assert (e["path"], e["start"], e["end"], e["sha256"]) == (pinned["path"], pinned["start"], pinned["end"], pinned["sha256"])
        assert e["claim"]


def test_diagram_follows_the_block_kinds(view):
    kinds = {d["kind"]: d for d in view["diagram"]["kinds"]}
    dense_parts = {b["part"] for b in kinds["dense_block"]["boxes"]}
    moe_parts = {b["part"] for b in kinds["MoE_block"]["boxes"]}
    # the router and the experts are drawn in the MoE blocks only (block 0 is dense in config.json: first_k_dense_replace)
    assert RELEASED["first_k_dense_replace"] == 1
    assert "gate" not in {b["label"] for b in kinds["dense_block"]["boxes"]} and "gate" in {b["label"] for b in kinds["MoE_block"]["boxes"]}
    assert "routed_output" not in dense_parts and {"routed_output", "shared_expert_output"} <= moe_parts
    assert {"attention_norm_output", "attention_output", "mlp_norm_output", "mlp_output"} <= dense_parts
    assert [a["part"] for a in kinds["MoE_block"]["adds"]] == ["layer_mid", "layer_output"]
    assert view["blocks"][0] == 0 and set(view["blocks"][1:]) == {1}  # block 0 dense, the rest MoE
    for d in view["diagram"]["kinds"]:
        for b in d["boxes"]:
            assert b["link"] in view["nodes"], b["link"]
            assert b["part"] in view["values"]
            assert b["x"] + b["w"] <= d["width"]


def test_values_resolved_at_the_checkpoints_sizes(view):
    v = view["values"]
    assert v["token_embeddings"]["shape"] == ["batch", "seq", RELEASED["hidden_size"]]
    assert v["lm_head_output"]["shape"] == ["batch", "seq", RELEASED["vocab_size"]]
    assert v["expert_weights"]["shape"] == ["batch", "seq", RELEASED["num_experts_per_tok"]]


def test_values_are_supports_rows_that_the_family_produces(kimi, view):
    produced = {v["name"] for h in kimi["support"]["hosts"] for v in h["values"] if v["read_at"] is not None and v["blocks"] != []}
    assert set(view["values"]) == produced
    assert {n[len("value."):] for n in view["nodes"] if n.startswith("value.")} == produced

    facts = copy.deepcopy(kimi)
    mlp = next(h for h in facts["support"]["hosts"] if h["host"] == "layers[i].mlp")
    for v in mlp["values"]:
        if v["name"] in ("router_logits", "routed_output"):  # as on a dense model: placed in no block
            v.update(read_at=None, module=None, blocks=[], condition="no block")
    doctored = pages.site(facts)
    for gone in ("router_logits", "routed_output"):
        assert gone not in doctored["values"] and f"value.{gone}" not in doctored["nodes"]
        assert gone not in {e["term"] for e in doctored["search"]} and gone not in doctored["preview_values"]
        parts = [p["part"] for d in doctored["diagram"]["kinds"] for p in d["boxes"] + d["adds"] + d["terminals"]]
        assert gone not in parts + [s["part"] for s in doctored["diagram"]["flow"]]
    # the box stays, naming its module only
    moe = next(d for d in doctored["diagram"]["kinds"] if d["kind"] == "MoE_block")
    assert next(b for b in moe["boxes"] if b["label"] == "experts")["part"] is None
    check_pages(doctored, "kimi_k2")


@pytest.mark.parametrize("key", ["support", "preview", "notes", "config.explained", "checkpoint_check.figures", "checkpoint_check.not_checked"])
def test_the_family_page_reads_the_facts_whole(kimi, view, key):
    """No template guards a key that facts always have: facts without one fail to render instead of
    quietly dropping a section or falling back to an older layout."""
    import jinja2

    from atlas.render.environment import environment
    from atlas.render.site import page_data

    template = environment().get_template("family.html")
    template.render(f=kimi, v=view, root="../", data=page_data(view))  # whole facts render
    facts = copy.copy(kimi)
    *outer, last = key.split(".")
    holder = facts
    for part in outer:
        holder[part] = copy.copy(holder[part])
        holder = holder[part]
    del holder[last]
    with pytest.raises(jinja2.UndefinedError):
        template.render(f=facts, v=view, root="../", data=page_data(view))


@pytest.mark.parametrize(
    "family, expected",
    [
        # a norm before each part (Llama)
        ("llama", {"pre_attn": "input_layernorm", "pre_ffn": "post_attention_layernorm", "post_attn": None, "post_ffn": None}),
        # norms on both sides of each part (Gemma 2)
        ("gemma2", {"pre_attn": "input_layernorm", "post_attn": "post_attention_layernorm", "pre_ffn": "pre_feedforward_layernorm", "post_ffn": "post_feedforward_layernorm"}),
        # norms after each part only (OLMo 2)
        ("olmo2", {"pre_attn": None, "post_attn": "post_attention_layernorm", "pre_ffn": None, "post_ffn": "post_feedforward_layernorm"}),
        # GPT-2's names
        ("gpt2", {"pre_attn": "ln_1", "pre_ffn": "ln_2", "post_attn": None, "post_ffn": None}),
    ],
)
def test_block_anatomy_is_the_blocks_proven_steps(collected, family, expected):
    facts = pages.with_annotated_trees(collected(family).facts)
    block = facts["accounting"]["block_kinds"][0]["tree"]
    a = anatomy(block)
    assert {k: a[k] for k in expected} == expected
    assert a["attn"] in ("self_attn", "attn") and a["ffn"] == "mlp"
    # the block's steps have one norm step after a part for each post-norm
    steps = [st["tex"] for st in facts["equations"]["components"][block["page_id"]]["steps"]]
    post = [t for t in steps if r"\leftarrow\operatorname{Norm}" in t]
    assert len(post) == sum(1 for k in ("post_attn", "post_ffn") if expected[k])


def test_page_claims_are_checked_before_writing(view):
    check_pages(view, "kimi_k2")  # the real pages pass
    from atlas.errors import AtlasError

    broken = copy.deepcopy(view)
    broken["nodes"]["MoE_block.self_attn"]["accounting"][0]["parameters"] += 1
    with pytest.raises(AtlasError, match="MoE_block.self_attn.*sums to 101,124,097"):
        check_pages(broken, "kimi_k2")
    broken = copy.deepcopy(view)
    broken["nodes"]["MoE_block.mlp"]["children"].append({"id": "MoE_block.mlp.nowhere"})
    with pytest.raises(AtlasError, match="nowhere"):
        check_pages(broken, "kimi_k2")
    broken = copy.deepcopy(view)
    broken["values"]["router_logits"]["read_at"] = None  # a value placed nowhere, listed anyway
    with pytest.raises(AtlasError, match="router_logits.*places it nowhere"):
        check_pages(broken, "kimi_k2")
    broken = copy.deepcopy(view)
    del broken["values"]["shared_expert_output"]  # the diagram's shared expert still names it
    with pytest.raises(AtlasError, match="diagram MoE_block.*shared_expert_output"):
        check_pages(broken, "kimi_k2")
