"""The preview run: a tiny config derived by rule, identities measured, shapes checked, compact data;
and a wrong standard-name override fails the build, naming the identity it broke."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_build

REQUIRED_IDENTITIES = {"block_sum", "mixture_sum", "expert_weights_sum", "attention_rows", "embeddings", "logits"}


@pytest.fixture(scope="session")
def preview(kimi):
    return kimi["preview"]


def test_tiny_config_keeps_the_pinned_rules(kimi, preview):
    tiny, raw = preview["config"], kimi["config"]["raw"]
    assert tiny["num_hidden_layers"] == 3 and tiny["first_k_dense_replace"] == raw["first_k_dense_replace"] == 1
    # the same share of experts per token (8 of 384 on K2) at small sizes
    assert tiny["top_k"] / tiny["num_experts"] == raw["num_experts_per_tok"] / raw["n_routed_experts"]
    assert tiny["routed_scaling_factor"] == raw["routed_scaling_factor"]
    assert (tiny["n_group"], tiny["topk_group"], tiny["norm_topk_prob"]) == (raw["n_group"], raw["topk_group"], raw["norm_topk_prob"])
    rope = tiny["rope_parameters"]
    for key, value in raw["rope_scaling"].items():
        if key != "type":
            assert rope[key] == value, key
    assert tiny["hidden_size"] <= 128 and tiny["vocab_size"] <= 512


def test_mixture_block_pattern_of_deepseek_v3(collected):
    tiny = collected("deepseek_v3").facts["preview"]
    assert tiny["config"]["num_hidden_layers"] == 5  # its 3 dense first blocks, then 2 mixture blocks
    assert sorted(tiny["shapes"]["routed_output"]) == ["3", "4"]
    assert all(i["holds"] for i in tiny["identities"])


def test_every_identity_holds_within_1e_5(preview):
    ids = {i["id"]: i for i in preview["identities"]}
    assert REQUIRED_IDENTITIES <= set(ids)
    for ident in ids.values():
        assert ident["holds"] and ident["max_abs_residual"] <= 1e-5 and ident["tolerance"] == 1e-5
    assert ids["block_sum"]["blocks"] == [0, 1, 2]
    assert ids["mixture_sum"]["blocks"] == [1, 2]
    assert "2.827" in ids["expert_weights_sum"]["statement"]
    assert preview["not_applicable"] == []


def test_every_value_captured_in_its_layout_shape(preview):
    # the tiny sizes by hand: 31 prompt bytes; 4 heads of 16 + 8 query/key width, 16 value width; 96 experts, 2 per token
    s = preview["shapes"]
    assert preview["tokens"] == list(preview["prompt"].encode())
    assert s["attention_queries"]["1"] == [1, 4, 31, 24]
    assert s["attention_values"]["1"] == [1, 4, 31, 16]
    assert s["attention_scores"]["0"] == [1, 4, 31, 31]
    assert s["attention_premix"]["2"] == [1, 31, 4, 16]
    assert s["router_logits"]["1"] == [1, 31, 96]
    assert s["expert_outputs"]["2"] == [1, 31, 2, 64]
    assert s["mlp_neurons"] == {"0": [1, 31, 128]}
    assert s["logits"] == {"model": [1, 31, 256]}
    for name in ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output"):
        assert sorted(s[name]) == ["1", "2"], name  # missing at block 0, present at the mixture blocks
        assert list(preview["missing"][name]) == ["0"] and "not a mixture" in preview["missing"][name]["0"]
    assert preview["uncaptured"] == []


def test_router_bias_changes_some_selections(preview):
    assert preview["selection_changed_by_bias"].keys() == {"1", "2"}
    assert sum(preview["selection_changed_by_bias"].values()) > 0


def test_preview_data_is_compact(preview):
    tensors = preview["tensors"]
    assert len(json.dumps(tensors)) <= 1_000_000
    for block in range(3):
        assert f"layers.{block}.layer_output" in tensors
        assert tensors[f"layers.{block}.self_attn.attention_probabilities"]["shape"] == [4, 31, 31]
    assert tensors["layers.1.mlp.expert_weights"]["shape"] == [31, 2]
    assert "layers.0.mlp.expert_weights" not in tensors
    for name, t in tensors.items():
        assert t["dtype"] in ("float16", "int64"), name
        flat = t["data"]
        while flat and isinstance(flat[0], list):
            flat = [x for row in flat for x in row]
        assert min(flat) == t["min"] and max(flat) == t["max"], name
    weights = tensors["layers.1.mlp.expert_weights"]["data"]
    assert all(abs(sum(row) - 2.827) < 1e-2 for row in weights)  # float16 rows still sum to the scaling factor


def test_preview_run_is_deterministic():
    from atlas import preview
    from atlas.checkpoint import load_pinned, transformers_config
    from atlas.families import load

    family = load("kimi_k2")
    config = transformers_config(family, load_pinned(family.checkpoint))
    first, second = (json.dumps(preview.preview_facts(preview.run(family, config), family)) for _ in range(2))
    assert first == second


def test_wrong_override_fails_the_build_naming_the_identity(project_copy, tmp_path):
    module = project_copy / "atlas" / "families" / "deepseek_v3.py"
    text = module.read_text()
    assert "stored_extras=multi_token_prediction_tensors,\n)" in text
    module.write_text(text.replace(
        "stored_extras=multi_token_prediction_tensors,\n)",
        'stored_extras=multi_token_prediction_tensors,\n    standard_overrides={"routed_output": "shared_experts.output"},\n)',
    ))
    out = tmp_path / "site"
    out.mkdir()
    (out / "keep.txt").write_text("previous site")
    result = run_build(project_copy, "--family", "kimi_k2", "--out", str(out))
    assert result.returncode == 1
    assert "identity mlp.routed_output + mlp.shared_expert_output == mlp.mlp_output" in result.stderr
    assert "max abs residual" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_a_shape_off_its_layout_fails_naming_the_value(preview):
    import copy

    from atlas.check import check_preview
    from atlas.errors import AtlasError

    doctored = copy.deepcopy(preview)
    doctored["shapes"]["attention_keys"]["1"] = [1, 1, 31, 24]  # one shared key head instead of the layout's 4
    with pytest.raises(AtlasError, match=r"shape of attention_keys at block 1: the preview run gave \[1, 1, 31, 24\], the layout Keys says \[1, 4, 31, 24\]"):
        check_preview("kimi_k2", doctored)
    doctored = copy.deepcopy(preview)
    doctored["identities"][0].update(holds=False, max_abs_residual=0.5)
    with pytest.raises(AtlasError, match=r"identity layers\[i\]\.input \+ self_attn\.attention_output \+ mlp\.mlp_output == layer_output"):
        check_preview("kimi_k2", doctored)
