"""support(): the vocabulary of SPEC §6 on Kimi K2's and DeepSeek-V3's modules, at their checkpoints' sizes."""

from __future__ import annotations

import pytest

from atlas import standard

# SPEC §6, copied here by hand: the independent source for the vocabulary.
SPEC_NAMES = {
    "model": ["logits", "token_embeddings", "final_norm_output", "lm_head_output", "next_token_probs", "input_ids",
              "attention_mask", "input_size"],
    "layers[i]": ["layer_input", "attention_norm_output", "layer_mid", "mlp_norm_output", "mlp_input", "layer_output"],
    "layers[i].self_attn": ["attention_queries", "attention_keys", "attention_values", "attention_scores",
                            "attention_probabilities", "attention_head_outputs", "attention_premix", "attention_output"],
    "layers[i].mlp": ["mlp_activation", "mlp_neurons", "mlp_output", "router_logits", "expert_weights", "expert_indices",
                      "expert_outputs", "routed_output", "shared_expert_output"],
}
SPEC_LAYOUTS = {
    "Tokens": "batch seq", "Residual": "batch seq hidden_size", "Logits": "batch seq vocab_size",
    "NextTokenProbs": "batch vocab_size", "Queries": "batch num_heads seq qk_head_dim",
    "Keys": "batch num_kv_heads seq qk_head_dim", "Values": "batch num_kv_heads seq head_dim",
    "Pattern": "batch num_heads query key", "HeadOutputs": "batch seq num_heads head_dim",
    "Neurons": "batch seq intermediate_size", "RouterLogits": "batch seq num_experts",
    "ExpertWeights": "batch seq top_k", "ExpertIndices": "batch seq top_k", "ExpertOutputs": "batch seq top_k hidden_size",
}
MIXTURE = ["router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output"]
DENSE_ONLY = ["mlp_activation", "mlp_neurons"]


def values_by_name(facts):
    return {v["name"]: dict(v, host=h["host"]) for h in facts["support"]["hosts"] for v in h["values"]}


def test_vocabulary_is_spec_section_6():
    for host, names in SPEC_NAMES.items():
        assert [v.name for v in standard.VOCABULARY if v.host == host and not v.extension] == names
    for layout, dims in SPEC_LAYOUTS.items():
        assert standard.LAYOUTS[layout] == tuple(dims.split())


def test_dims_resolve_at_checkpoint_sizes_and_keep_call_dims():
    assert standard.resolve_dims("Residual", {"hidden_size": 7168}) == ["batch", "seq", 7168]
    assert standard.resolve_dims("Pattern", {"num_heads": 64}) == ["batch", 64, "query", "key"]
    assert standard.resolve_dims("Tokens", {"batch": 1, "seq": 5}) == [1, 5]


def test_kimi_support_has_every_name_on_its_four_hosts(kimi):
    hosts = kimi["support"]["hosts"]
    assert [h["host"] for h in hosts] == list(SPEC_NAMES)
    for host in hosts:
        assert [v["name"] for v in host["values"]] == SPEC_NAMES[host["host"]]
        for v in host["values"]:
            assert v["layout"] and v["dims"] == list(standard.LAYOUTS[v["layout"]])
            assert v["description"] and v["read_at"] and "condition" in v
    assert [h["class"] for h in hosts] == ["DeepseekV3ForCausalLM", "DeepseekV3DecoderLayer", "DeepseekV3Attention",
                                           "DeepseekV3MLP / DeepseekV3MoE"]


def test_kimi_shapes_at_checkpoint_sizes(kimi):
    # Kimi-K2-Instruct's config.json: hidden 7168, 64 heads, qk 128 + 64, v 128, vocab 163840, 384 experts, 8 per token.
    v = values_by_name(kimi)
    assert v["layer_output"]["shape"] == ["batch", "seq", 7168]
    assert v["logits"]["shape"] == ["batch", "seq", 163840]
    assert v["next_token_probs"]["shape"] == ["batch", 163840]
    assert v["attention_queries"]["shape"] == ["batch", 64, "seq", 128 + 64]
    assert v["attention_keys"]["shape"] == ["batch", 64, "seq", 128 + 64]
    assert v["attention_values"]["shape"] == ["batch", 64, "seq", 128]
    assert v["attention_probabilities"]["shape"] == ["batch", 64, "query", "key"]
    assert v["attention_premix"]["shape"] == ["batch", "seq", 64, 128]
    assert v["mlp_neurons"]["shape"] == ["batch", "seq", 18432]
    assert v["router_logits"]["shape"] == ["batch", "seq", 384]
    assert v["expert_indices"]["shape"] == ["batch", "seq", 8]
    assert v["expert_outputs"]["shape"] == ["batch", "seq", 8, 7168]


def test_kimi_mixture_values_missing_at_block_0_only(kimi):
    v = values_by_name(kimi)
    for name in MIXTURE:
        assert v[name]["blocks"] == list(range(1, 61)), name
        assert list(v[name]["missing"]) == ["0"] and "not a mixture" in v[name]["missing"]["0"]
        assert "MoE blocks only" in v[name]["condition"]
    for name in DENSE_ONLY:
        assert v[name]["blocks"] == [0] and len(v[name]["missing"]) == 60
        assert "dense blocks only" in v[name]["condition"]
    assert v["layer_output"]["blocks"] == list(range(61)) and v["layer_output"]["missing"] == {}
    assert v["logits"]["blocks"] is None


def test_where_each_value_is_read_in_words(kimi):
    v = values_by_name(kimi)
    assert v["attention_norm_output"]["read_at"] == "the child module input_layernorm's output"
    assert v["layer_mid"]["read_at"].startswith("the child module post_attention_layernorm's input")
    assert v["layer_mid"]["module"] == "model.layers.{i}.post_attention_layernorm"
    assert v["attention_queries"]["read_at"] == "inside the forward: the arguments of the attention function, element 1"
    assert v["attention_values"]["read_at"].endswith("element 3")
    assert v["attention_head_outputs"]["read_at"] == "inside the forward: the output of the attention function, element 0"
    assert v["router_logits"]["read_at"].startswith("the child module gate's output, element 0")
    assert v["routed_output"]["module"] == "model.layers.{i}.mlp.experts"
    assert v["shared_expert_output"]["module"] == "model.layers.{i}.mlp.shared_experts"
    assert v["token_embeddings"]["module"] == "model.embed_tokens"
    assert v["layer_output"]["read_at"] == "the module's own output, element 0"


def test_conditions_come_from_the_two_runs(kimi):
    v = values_by_name(kimi)
    for name in ("attention_scores", "attention_probabilities"):
        assert v[name]["condition"].startswith("eager attention only")
    assert v["expert_outputs"]["condition"].startswith("eager experts only")
    for name in ("attention_queries", "attention_head_outputs", "attention_output", "layer_output", "logits", "routed_output"):
        assert v[name]["condition"] in (None, "MoE blocks only"), name


def test_printout_lines_carry_the_values_their_module_hosts(kimi):
    by_text = {line["text"]: line["values"] for line in kimi["printout"] if line["values"]}
    assert by_text["DeepseekV3ForCausalLM("] == SPEC_NAMES["model"]
    assert by_text["(1-60): 60 x DeepseekV3DecoderLayer("] == SPEC_NAMES["layers[i]"]
    assert by_text["(mlp): DeepseekV3MoE("] == ["mlp_output"] + MIXTURE
    assert by_text["(mlp): DeepseekV3MLP("] == ["mlp_activation", "mlp_neurons", "mlp_output"]


def test_deepseek_v3_support_from_its_own_checkpoint(collected):
    facts = collected("deepseek_v3").facts
    v = values_by_name(facts)
    # DeepSeek-V3's config.json: 128 heads, 256 experts, vocab 129280, first 3 blocks dense.
    assert v["attention_queries"]["shape"] == ["batch", 128, "seq", 192]
    assert v["router_logits"]["shape"] == ["batch", "seq", 256]
    assert v["logits"]["shape"] == ["batch", "seq", 129280]
    for name in MIXTURE:
        assert v[name]["blocks"] == list(range(3, 61)) and sorted(v[name]["missing"], key=int) == ["0", "1", "2"]
    assert v["mlp_activation"]["blocks"] == [0, 1, 2]


@pytest.mark.parametrize("text, kind, module, element", [
    ("shared_experts.output", "output", "shared_experts", None),
    ("post_attention_layernorm.input[0]", "input", "post_attention_layernorm", 0),
    ("output[1]", "output", "", 1),
])
def test_overrides_are_parsed(text, kind, module, element):
    read = standard.parse_override(text)
    assert (read.kind, read.module, read.element) == (kind, module, element)


def test_a_malformed_override_is_refused():
    with pytest.raises(ValueError):
        standard.parse_override("shared_experts")


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_every_raw_config_key_is_explained(collected, name):
    config = collected(name).facts["config"]
    assert list(config["explained"]) == list(config["raw"])
    assert [k for k, words in config["explained"].items() if not words] == []
