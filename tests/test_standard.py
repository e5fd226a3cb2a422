"""support(): the vocabulary of SPEC §6 on Kimi K2's and DeepSeek-V3's modules, at their checkpoints' sizes."""

from __future__ import annotations

import pytest

from atlas.model import reads, vocabulary
from tests.conftest import released_config

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
        assert [v.name for v in vocabulary.VOCABULARY if v.host == host and not v.extension] == names
    for layout, dims in SPEC_LAYOUTS.items():
        assert vocabulary.LAYOUTS[layout] == tuple(dims.split())


def test_dims_resolve_at_checkpoint_sizes_and_keep_call_dims():
    assert vocabulary.resolve_dims("Residual", {"hidden_size": 7168}) == ["batch", "seq", 7168]
    assert vocabulary.resolve_dims("Pattern", {"num_heads": 64}) == ["batch", 64, "query", "key"]
    assert vocabulary.resolve_dims("Tokens", {"batch": 1, "seq": 5}) == [1, 5]


def test_kimi_support_has_every_name_on_its_four_hosts(kimi):
    hosts = kimi["support"]["hosts"]
    assert [h["host"] for h in hosts] == list(SPEC_NAMES)
    for host in hosts:
        assert [v["name"] for v in host["values"]] == SPEC_NAMES[host["host"]]
        for v in host["values"]:
            assert v["layout"] and v["dims"] == list(vocabulary.LAYOUTS[v["layout"]])
            assert v["description"] and v["read_at"] and "condition" in v
    assert [h["class"] for h in hosts] == ["DeepseekV3ForCausalLM", "DeepseekV3DecoderLayer", "DeepseekV3Attention",
                                           "DeepseekV3MLP / DeepseekV3MoE"]


def test_kimi_shapes_at_checkpoint_sizes(kimi):
    c = released_config("kimi_k2")
    d, V, H, E, K = c["hidden_size"], c["vocab_size"], c["num_attention_heads"], c["n_routed_experts"], c["num_experts_per_tok"]
    qk, v_head = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["v_head_dim"]
    v = values_by_name(kimi)
    assert v["layer_output"]["shape"] == ["batch", "seq", d]
    assert v["logits"]["shape"] == ["batch", "seq", V]
    assert v["next_token_probs"]["shape"] == ["batch", V]
    assert v["attention_queries"]["shape"] == ["batch", H, "seq", qk]
    assert v["attention_keys"]["shape"] == ["batch", c["num_key_value_heads"], "seq", qk]
    assert v["attention_values"]["shape"] == ["batch", c["num_key_value_heads"], "seq", v_head]
    assert v["attention_probabilities"]["shape"] == ["batch", H, "query", "key"]
    assert v["attention_premix"]["shape"] == ["batch", "seq", H, v_head]
    assert v["mlp_neurons"]["shape"] == ["batch", "seq", c["intermediate_size"]]
    assert v["router_logits"]["shape"] == ["batch", "seq", E]
    assert v["expert_indices"]["shape"] == ["batch", "seq", K]
    assert v["expert_outputs"]["shape"] == ["batch", "seq", K, d]


def test_kimi_mixture_values_missing_at_block_0_only(kimi):
    c = released_config("kimi_k2")
    dense, n = c["first_k_dense_replace"], c["num_hidden_layers"]
    assert dense == 1
    v = values_by_name(kimi)
    for name in MIXTURE:
        assert v[name]["blocks"] == list(range(dense, n)), name
        assert list(v[name]["missing"]) == ["0"] and "not a mixture" in v[name]["missing"]["0"]
        assert "MoE blocks only" in v[name]["condition"]
    for name in DENSE_ONLY:
        assert v[name]["blocks"] == [0] and len(v[name]["missing"]) == n - dense
        assert "dense blocks only" in v[name]["condition"]
    assert v["layer_output"]["blocks"] == list(range(n)) and v["layer_output"]["missing"] == {}
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
    c = released_config("deepseek_v3")
    dense, n = c["first_k_dense_replace"], c["num_hidden_layers"]
    v = values_by_name(facts)
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    assert v["attention_queries"]["shape"] == ["batch", c["num_attention_heads"], "seq", qk]
    assert v["router_logits"]["shape"] == ["batch", "seq", c["n_routed_experts"]]
    assert v["logits"]["shape"] == ["batch", "seq", c["vocab_size"]]
    for name in MIXTURE:
        assert v[name]["blocks"] == list(range(dense, n)) and sorted(v[name]["missing"], key=int) == [str(i) for i in range(dense)]
    assert v["mlp_activation"]["blocks"] == list(range(dense))


@pytest.mark.parametrize("text, kind, module, element", [
    ("shared_experts.output", "output", "shared_experts", None),
    ("post_attention_layernorm.input[0]", "input", "post_attention_layernorm", 0),
    ("output[1]", "output", "", 1),
])
def test_overrides_are_parsed(text, kind, module, element):
    read = reads.parse_override(text)
    assert (read.kind, read.module, read.element) == (kind, module, element)


def test_a_malformed_override_is_refused():
    with pytest.raises(ValueError):
        reads.parse_override("shared_experts")


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_every_raw_config_key_is_explained(collected, name):
    config = collected(name).facts["config"]
    assert list(config["explained"]) == list(config["raw"])
    assert [k for k, words in config["explained"].items() if not words] == []
