"""Abbreviations derived from the facts, and a search box whose every result is a page."""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace

import pytest

from atlas.model import features
from atlas.model.block_kinds import blocks_without_rotary
from atlas.render import pages, search
from atlas.errors import AtlasError
from tests.conftest import search_data


def abbreviations(facts) -> list[str]:
    return [f["abbreviation"] for f in facts["features"]]


def terms(facts) -> set[str]:
    return {e["term"] for e in pages.site(facts)["search"]}


def test_grouped_query_attention_is_found_from_the_head_counts(collected):
    llama, gpt2, gemma3 = (collected(n).facts for n in ("llama", "gpt2", "gemma3"))
    # Llama-3.1-8B's config.json: 32 query heads, 8 key/value heads; GPT-2 has one key/value head per
    # query head (n_head 12, no separate count); gemma-3-1b: 4 query heads and 1 key/value head.
    assert (llama["config"]["raw"]["num_attention_heads"], llama["config"]["raw"]["num_key_value_heads"]) == (32, 8)
    assert "num_key_value_heads" not in gpt2["config"]["raw"]
    assert gemma3["config"]["raw"]["num_key_value_heads"] == 1
    assert "GQA" in abbreviations(llama) and "MQA" not in abbreviations(llama)
    assert "GQA" not in abbreviations(gpt2) and "MQA" not in abbreviations(gpt2)
    assert "MQA" in abbreviations(gemma3) and "GQA" not in abbreviations(gemma3)
    assert "gqa" in terms(llama) and "gqa" not in terms(gpt2)


def test_kimi_k2_is_found_by_mla_and_fp8_and_gpt_oss_by_mxfp4_and_swa(collected):
    kimi, gpt_oss, gpt2 = (collected(n).facts for n in ("kimi_k2", "gpt_oss", "gpt2"))
    assert {"mla", "fp8", "moe", "rope"} <= terms(kimi)
    assert "mxfp4" not in terms(kimi) and "swa" not in terms(kimi)
    assert {"mxfp4", "swa", "moe", "gqa"} <= terms(gpt_oss)
    assert "fp8" not in terms(gpt_oss) and "mla" not in terms(gpt_oss)
    # GPT-2: learned positions, one key/value head per query head, dense, unquantized.
    assert abbreviations(gpt2) == []


def test_the_evidence_is_in_the_checkpoints_own_numbers(collected):
    kimi = {f["abbreviation"]: f for f in collected("kimi_k2").facts["features"]}
    raw = collected("kimi_k2").facts["config"]["raw"]
    assert f"{raw['kv_lora_rank']}-wide latent" in kimi["MLA"]["evidence"]
    assert f"{raw['num_experts_per_tok']} of {raw['n_routed_experts']} routed experts" in kimi["MoE"]["evidence"]
    assert f"{raw['num_hidden_layers'] - raw['first_k_dense_replace']} of {raw['num_hidden_layers']} blocks" in kimi["MoE"]["evidence"]
    gpt_oss = {f["abbreviation"]: f for f in collected("gpt_oss").facts["features"]}
    oss_raw = collected("gpt_oss").facts["config"]["raw"]
    sliding = oss_raw["layer_types"].count("sliding_attention")
    assert f"{sliding} of {len(oss_raw['layer_types'])} blocks attend within a sliding window of {oss_raw['sliding_window']} positions" in gpt_oss["SWA"]["evidence"]


def test_a_block_without_rotary_makes_nope(kimi):
    # transformers' per-layer switch: 1 applies the rotary embedding, 0 does not.
    config = SimpleNamespace(no_rope_layers=[1, 1, 1, 0, 1, 1, 1, 0], num_hidden_layers=8)
    assert blocks_without_rotary(config) == [3, 7]
    assert blocks_without_rotary(SimpleNamespace(num_hidden_layers=8)) is None
    found = {f["abbreviation"]: f for f in features.derive(kimi, [3, 7])}
    assert found["NoPE"]["evidence"].startswith("blocks 3, 7 apply no rotary embedding")
    assert "NoPE" not in abbreviations(kimi)


def test_a_model_with_no_positions_at_all_is_nope(collected):
    facts = copy.deepcopy(collected("llama").facts)
    facts["printout"] = [line for line in facts["printout"] if "RotaryEmbedding" not in line["text"]]
    found = [f["abbreviation"] for f in features.derive(facts)]
    assert "NoPE" in found and "RoPE" not in found
    # GPT-2 learns a position table: no rotary embedding, but positions all the same.
    assert "NoPE" not in abbreviations(collected("gpt2").facts)


def test_every_search_entry_leads_to_a_page_of_its_family(collected):
    for name in ("kimi_k2", "gpt2", "qwen3_moe"):
        facts = collected(name).facts
        view = pages.site(facts)
        files = {"index.html"} | {f"c/{nid}.html" for nid in view["nodes"] if nid != "family"}
        for entry in view["search"]:
            family, _, page = entry["target"].partition("/")
            assert family == name and page in files, entry
        # the family's own name is a family term, never a standard value (kimi_k2 has an underscore)
        assert not [e for e in view["search"] if e["kind"] == "value" and e["term"] == name]


def test_a_dense_model_is_not_a_result_for_mixture_values(collected):
    assert "expert_weights" not in terms(collected("gemma2").facts)
    assert "expert_weights" in terms(collected("kimi_k2").facts)


def test_an_entry_without_a_page_fails_naming_the_family_and_the_term():
    entries = [{"term": "gqa", "kind": "feature", "target": "llama/index.html"},
               {"term": "router_logits", "kind": "value", "target": "llama/c/value.router_logits.html"}]
    with pytest.raises(AtlasError) as caught:
        search.check_targets("llama", entries, lambda rel: rel == "llama/index.html")
    assert str(caught.value) == "family llama: search: 'router_logits' leads to llama/c/value.router_logits.html, which is not a page of the site"


def test_the_built_index_offers_only_existing_pages_and_the_derived_tags(built_site):
    index = (built_site / "index.html").read_text(encoding="utf-8")
    cards = re.findall(r'<li class="card family-card" data-family="([^"]+)">(.*?)</li>\n', index, re.S)
    assert len(cards) == len(list(built_site.glob("*/facts.json")))
    data = search_data(built_site)
    assert sorted(data) == sorted(family for family, _ in cards)  # one entry a card, no more
    for family, body in cards:
        found = data[family]["words"]
        names, tools = data[family]["names"], data[family]["tools"]
        assert names, family  # every family shows standard values
        for term in names:  # the page static/atlas.js links each name to
            assert (built_site / family / "c" / f"value.{term}.html").is_file(), term
        for pair in tools:  # a library's name for a value: "hook_resid_pre=layer_input", that value's page
            assert (built_site / family / "c" / f"value.{pair.rsplit('=', 1)[1]}.html").is_file(), pair
        facts = json.loads((built_site / family / "facts.json").read_text(encoding="utf-8"))
        shown = re.findall(r'<abbr class="tag feature" title="[^"]*">([^<]+)</abbr>', body)
        assert shown == abbreviations(facts)
        assert all(a.lower() in found.split(" ") for a in shown)
