"""The fact sheet (facts.sheet), what-was-checked words, the folded printout and the page-size check.

Expected figures are derived by hand from the pinned config.json and checkpoint.json (released_config),
never read from the facts they check.
"""

from __future__ import annotations

import json

import markupsafe
import pytest

from atlas.check.pages import MAX_PAGE_BYTES, check_page_size, check_page_sizes, check_sheet
from atlas.errors import AtlasError
from atlas.facts.sheet import block_pattern
from atlas.render.environment import environment
from atlas.render.site import render_family
from tests.conftest import ROOT, released_config

KIMI = released_config("kimi_k2")
NEXT = released_config("qwen3_next")
BF16 = 2  # bytes a cached value takes at 16 bits


@pytest.fixture(scope="module")
def qwen3_next(collected):
    return collected("qwen3_next").facts


def pinned(repo: str) -> dict:
    return json.loads((ROOT / "atlas/checkpoints" / repo / "checkpoint.json").read_text())


# --- the figures, by hand from config.json ------------------------------------------------------------


def test_kimi_k2_sheet_figures_come_from_its_config(kimi):
    s = kimi["sheet"]
    layers, dense = KIMI["num_hidden_layers"], KIMI["first_k_dense_replace"]
    assert s["layers"]["count"] == layers
    assert s["layers"]["pattern"] == f"{dense} dense block, {layers - dense} MoE blocks"
    assert s["width"]["value"] == KIMI["hidden_size"]
    assert (s["heads"]["query"], s["heads"]["kv"]) == (KIMI["num_attention_heads"], KIMI["num_key_value_heads"])
    assert s["heads"]["head_dim"] == KIMI["v_head_dim"]
    assert s["heads"]["qk_head_dim"] == KIMI["qk_nope_head_dim"] + KIMI["qk_rope_head_dim"]
    assert s["vocabulary"]["value"] == KIMI["vocab_size"]
    assert s["context"]["value"] == KIMI["max_position_embeddings"]
    # latent attention caches the latent and the shared rotary key part, in every block
    assert s["kv_cache"]["bytes"] == (KIMI["kv_lora_rank"] + KIMI["qk_rope_head_dim"]) * layers * BF16
    assert s["kv_cache"]["latent"] is True
    rope = KIMI["rope_scaling"]
    assert s["positions"]["words"] == (f"RoPE, θ {int(KIMI['rope_theta']):,}, {rope['type']} × {int(rope['factor'])} "
                                       f"from {rope['original_max_position_embeddings']:,}")
    files = pinned("moonshotai/Kimi-K2-Instruct")["safetensors"]
    assert s["parameters"]["total"] == files["weight_parameters"]
    assert s["weights"]["bytes"] == files["payload_bytes"]
    assert s["weights"]["dtypes"] == sorted(files["bytes_by_dtype"])
    assert [(a["count"], a["attention"]) for a in s["attention"]] == [(layers, "latent")]


def test_qwen3_next_sheet_counts_the_global_blocks_cache_and_the_fixed_states(qwen3_next):
    s = qwen3_next["sheet"]
    layers, every = NEXT["num_hidden_layers"], NEXT["full_attention_interval"]
    globals_ = layers // every
    assert s["layers"]["pattern"] == f"{globals_} × ({every - 1} linear attention blocks, 1 global block)"
    # only the global blocks keep keys and values per token; the linear-attention blocks hold a state
    assert s["kv_cache"]["bytes"] == globals_ * 2 * NEXT["num_key_value_heads"] * NEXT["head_dim"] * BF16
    assert s["kv_cache"]["fixed_state_blocks"] == layers - globals_
    assert s["positions"]["words"] == f"RoPE, θ {NEXT['rope_theta']:,}, on {int(NEXT['partial_rotary_factor'] * 100)}% of each head's dims"
    assert s["heads"]["href"] == "c/global_block.self_attn.html"  # the softmax attention's sizes, not the linear one's
    assert [(a["count"], a["attention"]) for a in s["attention"]] == [(layers - globals_, "linear"), (globals_, "full")]


def test_block_pattern_says_a_prefix_a_repeat_and_a_tail():
    assert block_pattern(["a"] * 5, {"a": "dense block"}) == "5 × dense block"
    labels = {"s": "sliding-window block", "g": "global block", "d": "dense block"}
    assert block_pattern((["s"] * 5 + ["g"]) * 4 + ["s"] * 2, labels) == "4 × (5 sliding-window blocks, 1 global block), then 2 sliding-window blocks"
    assert block_pattern(["d", "d"] + ["s", "g"] * 3, labels) == "2 dense blocks, then 3 × (1 sliding-window block, 1 global block)"


def test_every_sheet_link_leads_to_a_page(kimi):
    nodes = {"dense_block.self_attn": {}}
    with pytest.raises(AtlasError) as caught:
        check_sheet({"positions": {"words": "RoPE", "href": "c/rotary_emb.html"}}, nodes, "kimi_k2")
    assert str(caught.value) == "family kimi_k2: fact sheet positions: links to c/rotary_emb.html, which is not a page of the family"
    check_sheet({"heads": {"href": "c/dense_block.self_attn.html"}, "context": {"href": "#cost"}}, nodes, "kimi_k2")


# --- what was checked, in exact words ------------------------------------------------------------------


def test_the_checked_facts_name_the_pinned_figures_or_none(kimi, qwen3_next):
    k, q = kimi["sheet"]["checked"], qwen3_next["sheet"]["checked"]
    assert {"weight parameters", "payload bytes", "tensors"} <= set(k["headers"])
    assert q["headers"] == []  # checkpoint.json pins no header figure for Qwen3-Next
    assert pinned("Qwen/Qwen3-Next-80B-A3B-Instruct")["safetensors"] == {}
    assert (k["config"], q["config"]) == ("copy", "verbatim")
    assert k["reproduced"] == k["steps"] > 0


def footer(checked) -> str:
    return str(environment().get_template("_sheet.html").module.checked_footer(checked))


def test_footer_words_say_exactly_what_was_checked():
    pinned_figures = {"headers": ["tensors", "payload bytes"], "header_figures": 14, "config": "copy", "guessed": [], "steps": 127, "reproduced": 127}
    none_pinned = {"headers": [], "header_figures": 10, "config": "reconstructed", "guessed": ["rope_theta", "use_cache"], "steps": 47, "reproduced": 47}
    assert footer(pinned_figures) == (
        "Every figure on this page was computed at build time from the model's own transformers classes. Checked for this "
        "family: 127 of 127 equation steps reproduced on the preview run; 2 of 14 figures of the checkpoint's files checked "
        "against its pinned headers (tensors, payload bytes); config.json: copy")
    assert footer(none_pinned) == (
        "Every figure on this page was computed at build time from the model's own transformers classes. Checked for this "
        "family: 47 of 47 equation steps reproduced on the preview run; no header figure of the checkpoint is pinned, so its "
        "predicted files are not checked against the released ones; config.json: reconstructed, with 2 guessed values "
        "(rope_theta, use_cache)")


@pytest.fixture(scope="module")
def next_pages(qwen3_next):
    return render_family(qwen3_next)


def test_qwen3_next_pages_claim_no_header_check(next_pages, qwen3_next):
    tensor = next_pages["qwen3_next/c/global_block.self_attn.q_proj.weight.html"]
    assert "checked against the pinned headers" not in tensor
    assert "no header figure of this checkpoint is pinned, so the layout is predicted, not checked against the released files" in tensor
    for page in ("qwen3_next/index.html", "qwen3_next/c/global_block.self_attn.q_proj.weight.html"):
        assert "no header figure of the checkpoint is pinned" in next_pages[page]
        assert "and checked." not in next_pages[page]
    family = next_pages["qwen3_next/index.html"]
    assert "no header figure pinned: files predicted, not checked" in family
    assert "config.json: verbatim" in family
    steps = qwen3_next["equations"]["total"]["steps"]
    assert f"equations proven: {steps} of {steps} steps" in family


# --- pages a person can finish ----------------------------------------------------------------------------


def test_the_printout_prints_each_kind_of_block_once(qwen3_next):
    layers, every = NEXT["num_hidden_layers"], NEXT["full_attention_interval"]
    heads = [line["text"] for line in qwen3_next["printout"] if "DecoderLayer(" in line["text"]]
    linear = ", ".join(f"{i}-{i + every - 2}" for i in range(0, layers, every))
    full = ", ".join(str(i) for i in range(every - 1, layers, every))
    assert heads == [f"({linear}): {layers - layers // every} x Qwen3NextDecoderLayer(", f"({full}): {layers // every} x Qwen3NextDecoderLayer("]


def test_value_pages_link_the_preview_paragraph_instead_of_repeating_it(next_pages, qwen3_next):
    description = str(markupsafe.escape(qwen3_next["preview"]["description"]))  # as the page writes it
    assert description in next_pages["qwen3_next/index.html"]
    values = [text for path, text in next_pages.items() if "/c/value." in path]
    assert values and not any(description in text for text in values)
    assert all('href="../index.html#preview"' in text for text in values if 'id="preview-data"' in text)


def test_a_page_over_the_limit_is_one_line_naming_it_and_its_size(tmp_path):
    check_page_size("kimi_k2/index.html", "x" * MAX_PAGE_BYTES)
    with pytest.raises(AtlasError) as caught:
        check_page_size("deepseek_v4/index.html", "é" * (MAX_PAGE_BYTES // 2 + 1))  # two bytes each in UTF-8
    assert str(caught.value) == f"page deepseek_v4/index.html: {MAX_PAGE_BYTES + 2:,} bytes, over the {MAX_PAGE_BYTES:,} a page may weigh"
    (tmp_path / "a" / "c").mkdir(parents=True)
    (tmp_path / "a" / "index.html").write_text("small")
    (tmp_path / "a" / "c" / "big.html").write_bytes(b"x" * (MAX_PAGE_BYTES + 1))
    with pytest.raises(AtlasError) as caught:
        check_page_sizes(tmp_path)
    assert str(caught.value).startswith("page a/c/big.html: 300,001 bytes")


def test_every_page_of_these_families_is_under_the_limit(next_pages):
    assert max(len(text.encode()) for path, text in next_pages.items() if path.endswith(".html")) <= MAX_PAGE_BYTES


def test_zero_computation_experts_make_the_sheet_s_active_count_a_range(collected):
    """LongCat-Flash's router may send a slot to an expert that computes nothing, so the parameters a token
    meets lie between every slot on such an expert and none: the sheet shows both ends, as the cost does."""
    facts = collected("longcat_flash").facts
    config = released_config("longcat_flash")
    assert config["zero_expert_num"] > 0  # the config, by hand: experts that compute nothing exist
    parameters = facts["sheet"]["parameters"]
    assert parameters["active_fewest"] < parameters["active"] == facts["accounting"]["model"]["active"]
    assert parameters["active_fewest"] == facts["cost"]["active"]["fewest"]
    html = str(environment().get_template("_sheet.html").module.fact_sheet(facts["sheet"], ""))
    assert f'title="{parameters["active_fewest"]:,} to {parameters["active"]:,}"' in html
