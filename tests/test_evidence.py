"""Evidence that contains what it claims: every excerpt a page cites holds the call, attribute or
operation it is cited for, and an excerpt that does not fails the build in one line."""

from __future__ import annotations

import copy
import json
import math
import re
from importlib import metadata

import pytest

from atlas.render import pages
from atlas.facts import excerpt_text, sources
from atlas.check.pages import check_pages
from atlas.errors import AtlasError

KV_B = ("dense_block.self_attn.kv_b_proj", "MoE_block.self_attn.kv_b_proj")


@pytest.fixture(scope="module")
def kimi_view(kimi):
    return pages.site(kimi)


@pytest.fixture(scope="module")
def gpt2(collected):
    return collected("gpt2").facts


@pytest.fixture(scope="module")
def gpt2_view(gpt2):
    return pages.site(gpt2)


def code_lines(text: str) -> list[str]:
    """The excerpt's lines with comments cut off (the test's own reading, a plain split on '#')."""
    return [line.split("#")[0] for line in text.splitlines()]


def test_the_attention_pins_the_method_its_forward_leaves_kv_b_proj_to(kimi):
    parts = kimi["excerpts"]["DeepseekV3Attention"]
    assert {"__init__", "forward", "expand_kv"} <= set(parts)
    expand = parts["expand_kv"]
    assert expand["qualname"] == "DeepseekV3Attention.expand_kv"
    sources.verify([expand])  # its sha256 against the installed file, like every other excerpt
    installed = metadata.distribution("transformers").locate_file("transformers") / expand["path"]
    lines = installed.read_text().splitlines(keepends=True)
    assert "".join(lines[expand["start"] - 1 : expand["end"]]) == expand["text"]
    assert any("self.kv_b_proj(" in line for line in code_lines(expand["text"]))
    assert not any("self.kv_b_proj(" in line for line in code_lines(parts["forward"]["text"]))
    assert any("self.expand_kv(" in line for line in code_lines(parts["forward"]["text"]))


@pytest.mark.parametrize("nid", KV_B)
def test_kv_b_proj_cites_an_excerpt_that_calls_it(kimi_view, kimi, nid):
    page = kimi_view["nodes"][nid]
    calls = [e for e in page["evidence"] if any("self.kv_b_proj(" in line for line in code_lines(e["text"]))]
    assert calls, [(e["class"], e["part"]) for e in page["evidence"]]
    for e in calls:
        pinned = kimi["excerpts"][e["class"]][e["part"]]
        assert (e["path"], e["start"], e["end"], e["sha256"]) == (pinned["path"], pinned["start"], pinned["end"], pinned["sha256"])
        assert "self.kv_b_proj(" in e["contains"]
        marked = [e["text"].splitlines()[n - e["start"]] for n in e["marks"]]
        assert marked and all("self.kv_b_proj(" in line for line in marked)
    # no item of the page cites an excerpt that lacks what it says it contains
    for e in page["evidence"]:
        for text in e["contains"]:
            assert any(text in line for line in code_lines(e["text"])), (e["class"], e["part"], text)
    # the attention's own page cites expand_kv as direct evidence, with the forward's call of it
    attention = kimi_view["nodes"][nid.rsplit(".", 1)[0]]["evidence"]
    direct = {e["part"]: e for e in attention if e["direct"]}
    assert "self.kv_b_proj(" in direct["expand_kv"]["contains"]
    assert "self.expand_kv(" in direct["forward"]["contains"]


@pytest.mark.parametrize("family", ["kimi_k2", "gpt2"])
def test_every_cited_text_is_in_the_cited_lines(request, family):
    view = request.getfixturevalue("kimi_view" if family == "kimi_k2" else "gpt2_view")
    cited = 0
    for nid, node in view["nodes"].items():
        for e in node["evidence"]:
            if e["direct"]:
                assert e["contains"], (nid, e["class"], e["part"])
            lines = code_lines(e["text"])
            for text in e["contains"]:
                assert any(text in line for line in lines), (nid, e["class"], e["part"], text)
                cited += 1
            assert all(e["start"] <= n <= e["end"] for n in e["marks"])
            assert all(any(t in lines[n - e["start"]] for t in e["contains"]) for n in e["marks"])
    assert cited > 50


def test_an_excerpt_that_lacks_its_claimed_call_fails_the_check_in_one_line(kimi_view, kimi):
    check_pages(kimi_view, "kimi_k2")  # the real pages pass
    broken = copy.deepcopy(kimi_view)
    nid = "MoE_block.self_attn.kv_b_proj"
    forward = kimi["excerpts"]["DeepseekV3Attention"]["forward"]
    items = broken["nodes"][nid]["evidence"]
    calling = next(i for i, e in enumerate(items) if "self.kv_b_proj(" in e["contains"])
    # the attention's forward in place of the method that holds the call, still claiming the call
    items[calling] = {**items[calling], "part": "forward", **{k: forward[k] for k in ("path", "start", "end", "sha256", "text", "qualname")}}
    with pytest.raises(AtlasError) as caught:
        check_pages(broken, "kimi_k2")
    message = str(caught.value)
    assert "\n" not in message
    assert message == (f"family kimi_k2: {nid}: the evidence DeepseekV3Attention.forward "
                       f"({forward['path']} lines {forward['start']}–{forward['end']}) does not contain `self.kv_b_proj(`")


def test_a_cited_excerpt_must_be_the_pinned_text(kimi_view):
    broken = copy.deepcopy(kimi_view)
    ev = broken["nodes"]["MoE_block.self_attn"]["evidence"][0]
    ev["text"] = ev["text"] + "        self.kv_b_proj(x)\n"  # text added to an excerpt keeps its old hash
    with pytest.raises(AtlasError, match="MoE_block.self_attn: the evidence .* shows other lines than the pinned excerpt"):
        check_pages(broken, "kimi_k2")


def test_a_call_in_a_comment_or_a_longer_name_is_not_contained():
    ex = {"start": 10, "text": "    # y = self.kv_b_proj(x)\n    y = self.kv_b_proj_extra(x)\n    z = self.kv_b_proj(x)  # here\n"}
    assert excerpt_text.lines_containing(ex, "self.kv_b_proj(") == [12]
    assert excerpt_text.lines_containing(ex, "self.kv_b_proj") == [12]
    assert excerpt_text.lines_containing({"start": 1, "text": "    # self.weight\n"}, "self.weight") == []


def test_a_component_forward_holds_the_children_its_steps_run(kimi_view, kimi):
    for nid in ("MoE_block", "MoE_block.mlp", "MoE_block.self_attn", "model"):
        proof = kimi["equations"]["components"][nid]
        texts = [t for e in kimi_view["nodes"][nid]["evidence"] if e["direct"] for t in e["contains"]]
        for attr in proof["reads"]:
            assert f"self.{attr}(" in texts or f"self.{attr}" in texts, (nid, attr)
    # the router's forward computes with the scores the proof measured (sigmoid in Kimi K2)
    gate = kimi["equations"]["components"]["MoE_block.mlp.gate"]
    assert gate["facts"]["routing"]["value"].startswith("sigmoid")
    forward = next(e for e in kimi_view["nodes"]["MoE_block.mlp.gate"]["evidence"] if e["part"] == "forward")
    assert {"self.weight", "self.e_score_correction_bias", "sigmoid"} <= set(forward["contains"])


def test_gpt2_outside_modules_cite_the_class_that_calls_them(gpt2_view, gpt2):
    # GPT2LMHeadModel holds the base model as self.transformer; the embeddings are the base model's
    assert gpt2["model"]["containers"] == {"": "GPT2LMHeadModel", "transformer": "GPT2Model"}
    for nid, attr in (("wte", "wte"), ("wpe", "wpe"), ("ln_f", "ln_f")):
        contextual = [e for e in gpt2_view["nodes"][nid]["evidence"] if not e["direct"]]
        assert {e["class"] for e in contextual} == {"GPT2Model"}
        assert f"self.{attr}(" in next(e for e in contextual if e["part"] != "__init__")["contains"]
    head = [e for e in gpt2_view["nodes"]["lm_head"]["evidence"] if not e["direct"]]
    assert {e["class"] for e in head} == {"GPT2LMHeadModel"}


def test_the_built_page_marks_the_lines_that_hold_the_call(built_site):
    page = (built_site / "kimi_k2/c/MoE_block.self_attn.kv_b_proj.html").read_text()
    marked = re.findall(r'<mark class="hit">(.*?)</mark>', page)
    assert any("self.kv_b_proj(" in m for m in marked)
    assert "<code>self.kv_b_proj(</code>" in page



# --- values read at a module's input, and the inputs' pages ---------------------------------------


@pytest.mark.parametrize("name, element", [("expert_weights", 1), ("expert_indices", 2)])
def test_the_routers_results_are_produced_by_the_router_not_the_experts(kimi_view, kimi, name, element):
    page = kimi_view["nodes"][f"value.{name}"]
    router = kimi_view["nodes"]["MoE_block.mlp.gate"]
    assert router["class"] == "DeepseekV3TopkRouter"
    assert [p["id"] for p in page["producers"]] == ["MoE_block.mlp.gate"] == [page["producer_id"]]
    assert page["receiver_id"] == "MoE_block.mlp.experts"
    # the router's forward returns it: its return statement's results, in order (read here from the excerpt)
    forward = kimi["excerpts"]["DeepseekV3TopkRouter"]["forward"]["text"]
    returned = [r.strip() for r in re.search(r"return (.+)", forward).group(1).split(",")]
    assert returned[0] == "router_logits" and returned[element].startswith("topk_")
    # the experts receive it as the argument of that name: their forward's signature, in order
    experts = kimi["excerpts"]["DeepseekV3Experts"]["forward"]["text"]
    arguments = re.findall(r"^\s+(\w+): torch\.Tensor", experts, re.M)
    assert arguments == ["hidden_states", "top_k_index", "top_k_weights"]
    expected_input = {"expert_weights": "top_k_weights", "expert_indices": "top_k_index"}[name]
    assert page["input_id"] == f"MoE_block.mlp.experts.in.{expected_input}"
    # the direct evidence is the router's code, with its return line marked; never the experts' forward
    direct = [e for e in page["evidence"] if e["direct"]]
    assert {e["class"] for e in direct} == {"DeepseekV3TopkRouter"}
    ret = next(e for e in direct if "return" in e["contains"])
    assert any(re.match(r"\s*return router_logits", ret["text"].splitlines()[n - ret["start"]]) for n in ret["marks"])
    # the lines handing it over are cited too, from the mixture's forward: the router's call and the experts'
    handed = [e for e in page["evidence"] if not e["direct"]]
    assert handed and handed[0]["class"] == "DeepseekV3MoE"
    assert {"self.gate(", "self.experts("} <= set(handed[0]["contains"])


def test_values_read_at_an_input_name_what_computed_them(kimi_view):
    nodes = kimi_view["nodes"]
    # layer_mid, read at the MLP norm's input, is the block's own sum: the block computes it
    assert [p["id"] for p in nodes["value.layer_mid"]["producers"]] == ["dense_block"]
    # mlp_input, read at the MLP's input, is the MLP norm's output
    assert [p["id"] for p in nodes["value.mlp_input"]["producers"]] == ["dense_block.post_attention_layernorm"]
    # layer_input: the token embedding for block 0, the previous block for every later one
    assert [p["id"] for p in nodes["value.layer_input"]["producers"]] == ["embed_tokens", "dense_block", "MoE_block"]
    # a value read at a module's output keeps that module as its producer
    assert [p["id"] for p in nodes["value.router_logits"]["producers"]] == ["MoE_block.mlp.gate"]


@pytest.mark.parametrize("family, block, attention, norm, block_list, embedding", [
    ("kimi_k2", "MoE_block", "MoE_block.self_attn", "MoE_block.input_layernorm", "layers", "embed_tokens"),
    ("gpt2", "transformer_block", "transformer_block.attn", "transformer_block.ln_1", "h", "wte"),
])
def test_the_block_and_attention_inputs_have_pages_naming_what_feeds_them(request, family, block, attention, norm, block_list, embedding):
    view = request.getfixturevalue("kimi_view" if family == "kimi_k2" else "gpt2_view")
    nodes = view["nodes"]
    # the block's input: the previous block's output; block 0's the stream entering the blocks
    block_in = nodes[f"{block}.in.hidden_states"]
    assert block_in["type"] == "input" and block_in["crumbs"][-1]["id"] == block
    assert "previous block" in block_in["fed_by"][0]["text"] and "blocks" in [h["id"] for h in block_in["fed_by"]]
    assert nodes[block]["io"]["in"][0]["link"] == block_in["id"]
    ev = block_in["evidence"]
    assert ev and all(e["direct"] for e in ev)
    marked = [e["text"].splitlines()[n - e["start"]] for e in ev for n in e["marks"]]
    assert any(f"self.{block_list}" in line for line in marked)
    if family == "kimi_k2":  # Kimi's x_0 is the token embedding itself; GPT-2 adds the positions first
        assert block_in["fed_by"][-1]["id"] == embedding
        assert any(f"self.{embedding}(" in line for line in marked)
    # the attention's input: the norm before it, called just before it in the block's forward
    attn_in = nodes[f"{attention}.in.hidden_states"]
    assert attn_in["fed_by"][0]["id"] == norm
    assert nodes[attention]["io"]["in"][0]["link"] == attn_in["id"]
    assert "attention_norm_output" in attn_in["values_here"]
    (e,) = attn_in["evidence"]
    lines = e["text"].splitlines()
    norm_line = next(n for n in e["marks"] if f"self.{norm.rsplit('.', 1)[1]}(" in lines[n - e["start"]])
    attn_line = next(n for n in e["marks"] if f"self.{attention.rsplit('.', 1)[1]}(" in lines[n - e["start"]])
    assert norm_line < attn_line
    check_pages(view, family)
    broken = copy.deepcopy(view)
    broken["nodes"][attn_in["id"]]["fed_by"][0]["id"] = f"{norm}.nowhere"
    with pytest.raises(AtlasError, match=f"{re.escape(attn_in['id'])}: links to '{re.escape(norm)}.nowhere', which has no page"):
        check_pages(broken, family)


# --- weight tensors as the checkpoint's files store them ---------------------------------------------

SAFETENSORS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", None: "F32"}


@pytest.mark.parametrize("kind", ["dense_block", "MoE_block"])
def test_kimi_q_a_proj_weight_is_stored_in_fp8_with_its_block_scales(kimi_view, kind):
    from tests.conftest import released_config

    config = released_config("kimi_k2")
    q = config["quantization_config"]
    assert q["quant_method"] == "fp8" and q["fmt"] == "e4m3"
    rows, cols = config["q_lora_rank"], config["hidden_size"]  # nn.Linear(hidden, q_lora_rank): [out, in]
    block_rows, block_cols = q["weight_block_size"]
    page = kimi_view["nodes"][f"{kind}.self_attn.q_a_proj.weight"]
    index = 0 if kind == "dense_block" else config["first_k_dense_replace"]
    name = f"model.layers.{index}.self_attn.q_a_proj.weight"
    weight, scale = page["stored"]
    assert (weight["name"], weight["count"], weight["dtype"], weight["shape"]) == (name, 1, "F8_E4M3", [rows, cols])
    assert weight["bytes"] == rows * cols  # one byte each
    assert (scale["name"], scale["dtype"], scale["scales"], scale["block"]) == (f"{name}_scale_inv", "F32", name, [block_rows, block_cols])
    assert scale["shape"] == [math.ceil(rows / block_rows), math.ceil(cols / block_cols)]
    assert scale["bytes"] == 4 * scale["shape"][0] * scale["shape"][1]


def test_kimi_experts_are_stored_one_tensor_per_expert(kimi_view):
    from tests.conftest import released_config

    config = released_config("kimi_k2")
    experts, inner, d = config["n_routed_experts"], config["moe_intermediate_size"], config["hidden_size"]
    stored = {e["name"]: e for e in kimi_view["nodes"]["MoE_block.mlp.experts.gate_up_proj"]["stored"]}
    first = config["first_k_dense_replace"]
    gate = stored[f"model.layers.{first}.mlp.experts.{{0…{experts - 1}}}.gate_proj.weight"]
    assert (gate["count"], gate["dtype"], gate["shape"], gate["total_bytes"]) == (experts, "F8_E4M3", [inner, d], experts * inner * d)
    assert f"model.layers.{first}.mlp.experts.{{0…{experts - 1}}}.up_proj.weight" in stored
    scale = stored[f"model.layers.{first}.mlp.experts.{{0…{experts - 1}}}.gate_proj.weight_scale_inv"]
    assert scale["shape"] == [math.ceil(inner / 128), math.ceil(d / 128)] and scale["count"] == experts


def test_gpt_oss_experts_are_stored_as_mxfp4_blocks_and_scales(collected):
    from tests.conftest import released_config

    config = released_config("gpt_oss")
    assert config["quantization_config"]["quant_method"] == "mxfp4"
    view = pages.site(collected("gpt_oss").facts)
    experts, d, inner = config["num_local_experts"], config["hidden_size"], config["intermediate_size"]
    page = next(n for nid, n in view["nodes"].items() if nid.endswith(".mlp.experts.down_proj"))
    blocks, scales = page["stored"]
    # down_proj maps inner -> d: stored [experts, out, in / 32, 16] (two 4-bit values a byte) and [experts, out, in / 32]
    assert (blocks["dtype"], blocks["shape"], blocks["values_per_element"]) == ("U8", [experts, d, inner // 32, 16], 2)
    assert (scales["dtype"], scales["shape"], scales["scales"], scales["block"]) == ("U8", [experts, d, inner // 32], blocks["name"], [32])
    assert blocks["bytes"] == experts * d * inner // 2


def test_gpt2_tensors_are_stored_in_the_dtype_the_checkpoint_rules_say(gpt2_view):
    from tests.conftest import ROOT, released_config

    rules = json.loads((ROOT / "atlas/checkpoints/openai-community/gpt2/checkpoint.json").read_text())
    config = released_config("gpt2")
    dtype = rules.get("weight_dtype") or SAFETENSORS[config.get("torch_dtype", config.get("dtype"))]
    assert dtype == "F32"
    prefix = rules["prefix_removed"]
    tensors = [n for n in gpt2_view["nodes"].values() if n["type"] == "tensor"]
    assert len(tensors) > 10
    for page in tensors:
        if page["path"] == "lm_head.weight":  # tied to the token embedding, stored once under its name
            assert page["stored"] == [] and page["stored_tied_to"] == "wte.weight"
            continue
        (e,) = page["stored"]
        assert (e["name"], e["dtype"], e["shape"]) == (page["path"].removeprefix(prefix), dtype, page["shape"])
        assert e["bytes"] == 4 * page["parameters"]


def test_a_tensor_summary_that_disagrees_with_the_layout_fails(collected):
    from atlas.check.claims import check_tensor_summary

    c = collected("kimi_k2")
    check = c.facts["checkpoint_check"]
    check_tensor_summary(check, c.layout)  # the real one agrees
    broken = copy.deepcopy(check)
    key = "model.layers.1.self_attn.q_a_proj.weight"
    broken["tensors"][key]["stored"][0]["dtype"] = "BF16"
    with pytest.raises(AtlasError, match=re.escape(f"tensor {key}: the page says {key} is stored as BF16")):
        check_tensor_summary(broken, c.layout)
    broken = copy.deepcopy(check)
    broken["tensors"]["model.layers.1.mlp.experts.down_proj"]["stored"][0]["count"] = 383
    with pytest.raises(AtlasError, match="stands for 384 tensors, the page counts 383"):
        check_tensor_summary(broken, c.layout)


def test_the_built_tensor_page_shows_the_stored_dtype_and_scale(built_site):
    page = (built_site / "kimi_k2/c/MoE_block.self_attn.q_a_proj.weight.html").read_text()
    assert "<code>F8_E4M3</code>" in page and "<code>F32</code>" in page
    assert "model.layers.1.self_attn.q_a_proj.weight_scale_inv" in page
