"""config.json in words: every explanation is written from the value it explains."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from atlas.model import config_words
from atlas.errors import AtlasError
from tests.conftest import ROOT

CONFIGS = sorted((ROOT / "atlas/checkpoints").glob("*/*/config.json"))
UNSAID = re.compile(r"\b(None|null|undefined|NaN)\b")


def words(raw: dict, key: str) -> str:
    return config_words.explain_config(raw, "test/config.json")[key]


def test_a_softmax_router_is_described_as_softmax_and_a_sigmoid_one_as_sigmoid():
    softmax = words({"scoring_func": "softmax", "n_routed_experts": 64}, "scoring_func")
    sigmoid = words({"scoring_func": "sigmoid", "n_routed_experts": 64}, "scoring_func")
    assert "softmax" in softmax and "sigmoid" not in softmax
    assert "sigmoid" in sigmoid and "softmax" not in sigmoid


def test_rope_scaling_names_its_own_type_and_settings():
    llama3 = words({"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}}, "rope_scaling")
    assert 'rope_type "llama3"' in llama3 and "YaRN" not in llama3
    assert "factor 8" in llama3 and "high_freq_factor 4" in llama3 and "8,192" in llama3
    yarn = words({"rope_scaling": {"factor": 32.0, "beta_fast": 1.0, "type": "yarn"}}, "rope_scaling")
    assert yarn.startswith("YaRN") and 'type "yarn"' in yarn and "factor 32" in yarn and "llama" not in yarn.lower()
    unset = words({"rope_scaling": None}, "rope_scaling")
    assert "no context extension" in unset and not UNSAID.search(unset)


def test_rope_parameters_per_attention_kind_are_each_described():
    text = words({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000},
                                      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000}}},
                 "rope_parameters")
    assert "sliding_attention: plain rotary" in text and "full_attention: linear scaling" in text
    assert "rope_theta 10,000" in text and "rope_theta 1,000,000" in text


def test_norm_topk_prob_off_says_the_weights_are_not_renormalized():
    off = words({"norm_topk_prob": False}, "norm_topk_prob")
    on = words({"norm_topk_prob": True, "routed_scaling_factor": 2.5}, "norm_topk_prob")
    assert "not renormalized" in off
    assert "renormalized to sum to one" in on and "not" not in on and "2.5" in on


@pytest.mark.parametrize("key", ["tie_word_embeddings", "attention_bias", "use_cache", "use_sliding_window"])
def test_a_switch_says_what_each_state_means(key):
    on, off = words({key: True}, key), words({key: False}, key)
    assert on != off


def test_key_value_heads_are_described_from_the_head_counts():
    # 32 query heads: 8 key/value heads share 4 each; 1 is shared by all; 32 share nothing.
    assert "each shared by 4 of the 32" in words({"num_attention_heads": 32, "num_key_value_heads": 8}, "num_key_value_heads")
    assert "multi-query" in words({"num_attention_heads": 32, "num_key_value_heads": 1}, "num_key_value_heads")
    assert "none is shared" in words({"num_attention_heads": 32, "num_key_value_heads": 32}, "num_key_value_heads")


def test_a_key_without_words_says_so_and_an_unset_value_never_prints_as_none():
    explained = config_words.explain_config({"made_up_key": 3, "head_dim": None, "pad_token_id": None}, "x/config.json")
    assert explained["made_up_key"] == config_words.NO_WORDS
    assert explained["head_dim"].startswith("Left unset") and explained["pad_token_id"].startswith("Left unset")
    assert not any(UNSAID.search(text) for text in explained.values())


@pytest.mark.parametrize("raw, key", [
    ({"num_attention_heads": "sixty-four"}, "num_attention_heads"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ({"rope_scaling": {"factor": 8.0}}, "rope_scaling"),
    ({"rope_scaling": [8.0]}, "rope_scaling"),
    ({"num_attention_heads": 32, "num_key_value_heads": 5}, "num_key_value_heads"),
])
def test_a_wrong_value_is_one_error_naming_the_file_and_the_key(raw, key):
    with pytest.raises(AtlasError) as caught:
        config_words.explain_config(raw, "atlas/checkpoints/org/repo/config.json")
    message = str(caught.value)
    assert message.startswith(f"atlas/checkpoints/org/repo/config.json: {key}: ") and "\n" not in message


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.parent.relative_to(ROOT / "atlas/checkpoints")))
def test_every_key_of_every_pinned_config_has_words_of_its_own(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    explained = config_words.explain_config(raw, str(path))
    assert list(explained) == list(raw)
    for key, text in explained.items():
        assert text != config_words.NO_WORDS, f"{path}: {key} has no words"
        assert not UNSAID.search(text), f"{path}: {key}: {text}"


def test_the_pinned_configs_are_described_from_their_own_values():
    def pinned(repo):
        return json.loads((ROOT / "atlas/checkpoints" / repo / "config.json").read_text(encoding="utf-8"))

    llama, kimi, mixtral = pinned("meta-llama/Llama-3.1-8B"), pinned("moonshotai/Kimi-K2-Instruct"), pinned("mistralai/Mixtral-8x7B-v0.1")
    assert "llama3" in words(llama, "rope_scaling") and "YaRN" not in words(llama, "rope_scaling")
    assert "YaRN" in words(kimi, "rope_scaling")
    k, n = kimi["num_experts_per_tok"], kimi["n_routed_experts"]
    assert f"{k} of the {n} routed experts" in words(kimi, "num_experts_per_tok")
    # Mixtral has no dense MLP: its intermediate_size is each expert's width.
    assert "each expert" in words(mixtral, "intermediate_size")


def _modeling_source(family_name: str) -> str:
    from atlas.inputs.checkpoint import transformers_class
    from atlas.families import load

    return Path(inspect.getsourcefile(transformers_class(load(family_name), "model_class"))).read_text(encoding="utf-8")


def test_a_key_the_model_never_reads_is_said_to_be_unread(collected):
    # gpt-oss's experts gate with their own function: its modeling file never names hidden_act.
    assert not re.search(r"\bhidden_act\b", _modeling_source("gpt_oss"))
    gpt_oss = collected("gpt_oss").facts["config"]["explained"]
    assert "never reads it" in gpt_oss["hidden_act"]
    # Llama's MLP reads it.
    assert re.search(r"\bconfig\.hidden_act\b", _modeling_source("llama"))
    assert "never reads it" not in collected("llama").facts["config"]["explained"]["hidden_act"]


def test_deepseek_v4_words_take_the_indexed_blocks_from_transformers_table(monkeypatch):
    """Which compress_ratios entry runs a lightning indexer is transformers' rule (its table of entries
    to layer types), and the words follow that table, not a number typed beside them."""
    from transformers.models.deepseek_v4 import configuration_deepseek_v4 as v4

    raw = {"architectures": ["DeepseekV4ForCausalLM"], "num_hidden_layers": 4, "compress_ratios": [0, 4, 128, 4],
           "index_topk": 512, "index_n_heads": 64}
    assert v4._COMPRESS_RATIO_TO_LAYER_TYPE[4] == "compressed_sparse_attention"  # the pinned transformers' table
    said = words(raw, "compress_ratios")
    assert "2 compressed by 4" in said and "the blocks compressing by 4 also run a lightning indexer" in said
    assert words(raw, "index_topk").startswith("On the blocks compressing by 4, each query reads the 512 compressed keys")
    monkeypatch.setattr(v4, "_COMPRESS_RATIO_TO_LAYER_TYPE", {0: "sliding_attention", 4: "heavily_compressed_attention",
                                                               128: "compressed_sparse_attention"})
    said = words(raw, "compress_ratios")
    assert "the blocks compressing by 128 also run a lightning indexer" in said
    assert words(raw, "index_n_heads").startswith("The indexer of each block compressing by 128 scores")
