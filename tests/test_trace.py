"""The capture API on real transformers models, including families the atlas does not cover yet."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import atlas  # noqa: E402
from atlas.model.vocabulary import BY_NAME, resolve_dims  # noqa: E402

IDS = torch.tensor([[5, 17, 3, 42, 9, 11, 2]])


def tiny_llama():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def tiny_qwen3_moe():
    config = transformers.Qwen3MoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.Qwen3MoeForCausalLM(config).eval()


def run(model, **implementations):
    if "attention" in implementations:
        model.set_attn_implementation(implementations["attention"])
    if "experts" in implementations:
        model.set_experts_implementation(implementations["experts"])
    with torch.no_grad(), atlas.trace(model) as t:
        out = model(IDS, attention_mask=torch.ones_like(IDS))
    return t, out


def test_llama_block_sum_and_layer_mid():
    model = tiny_llama()
    t, out = run(model, attention="eager")
    for layer in t.layers:
        torch.testing.assert_close(layer.input + layer.self_attn.attention_output + layer.mlp.mlp_output, layer.output)
        torch.testing.assert_close(layer.input + layer.self_attn.attention_output, layer.layer_mid)
    torch.testing.assert_close(t.logits, out.logits)
    torch.testing.assert_close(t.token_embeddings, t.layers[0].input)


def test_llama_shapes_follow_the_layouts():
    model = tiny_llama()
    t, _ = run(model, attention="eager")
    sizes = {"batch": 1, "seq": 7, "query": 7, "key": 7, "hidden_size": 32, "num_heads": 4, "num_kv_heads": 2,
             "head_dim": 8, "qk_head_dim": 8, "vocab_size": 64, "intermediate_size": 48}
    for (name, index), value in t.captured.items():
        layout = BY_NAME[name].layout
        if layout != "scalar":
            assert list(value.shape) == resolve_dims(layout, sizes), (name, index)


def test_causal_mask_survives_the_registered_attention():
    model = tiny_llama()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        plain = model(IDS).logits
    t, out = run(model)
    torch.testing.assert_close(out.logits, plain, rtol=0, atol=0)
    probs = t.layers[0].self_attn.attention_probabilities[0]  # (heads, query, key)
    above = torch.triu(torch.ones(7, 7, dtype=torch.bool), diagonal=1)
    assert probs[:, above].abs().max() == 0
    torch.testing.assert_close(probs.sum(-1), torch.ones(4, 7))


def test_default_attention_hides_the_pattern_and_says_why():
    model = tiny_llama()
    t, _ = run(model, attention="sdpa")
    assert t.layers[0].self_attn.attention_queries.shape == (1, 4, 7, 8)
    with pytest.raises(atlas.MissingValue, match='attn_implementation="eager"'):
        t.layers[0].self_attn.attention_probabilities
    with pytest.raises(atlas.MissingValue, match="not a mixture"):
        t.layers[0].mlp.routed_output


def test_trace_leaves_the_model_and_transformers_as_they_were():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    model = tiny_llama()
    model.set_attn_implementation("sdpa")
    run(model)
    assert model.config._attn_implementation == "sdpa"
    assert "atlas_trace" not in AttentionInterface._global_mapping
    assert "atlas_trace" not in AttentionMaskInterface._global_mapping
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_qwen3_moe_mixture_without_a_shared_expert():
    model = tiny_qwen3_moe()
    t, _ = run(model, attention="eager", experts="eager")
    for layer in t.layers:
        mlp = layer.mlp
        torch.testing.assert_close(layer.input + layer.self_attn.attention_output + mlp.mlp_output, layer.output)
        torch.testing.assert_close(mlp.routed_output, mlp.mlp_output)
        torch.testing.assert_close(mlp.expert_outputs.sum(dim=2), mlp.routed_output)
        torch.testing.assert_close(mlp.expert_weights.sum(-1), torch.ones(1, 7))
        assert mlp.router_logits.shape == (1, 7, 8) and mlp.expert_indices.shape == (1, 7, 2)
        with pytest.raises(atlas.MissingValue, match="no shared expert"):
            mlp.shared_expert_output


def test_grouped_experts_hide_the_slots():
    model = tiny_qwen3_moe()
    t, _ = run(model, attention="sdpa", experts="grouped_mm")
    assert t.layers[1].mlp.routed_output.shape == (1, 7, 32)
    with pytest.raises(atlas.MissingValue, match='experts_implementation="eager"'):
        t.layers[1].mlp.expert_outputs


def test_post_norms_are_found_generically_and_overrides_still_win():
    # Gemma 2 norms each sublayer's output before adding it: the contribution is the post-norm's output.
    # The generic roles find the post-norms (the block has post_feedforward_layernorm); an override can
    # still point elsewhere, here at the attention's raw output, and the block sum then breaks.
    config = transformers.Gemma2Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    torch.manual_seed(0)
    model = transformers.Gemma2ForCausalLM(config).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad(), atlas.trace(model, {}) as t:
        model(IDS)
    with torch.no_grad(), atlas.trace(model, {"attention_output": "output[0]"}) as raw:
        model(IDS)
    for i, layer in enumerate(t.layers):
        torch.testing.assert_close(layer.input + layer.self_attn.attention_output + layer.mlp.mlp_output, layer.output)
        wrong = raw.layers[i]
        assert (wrong.input + wrong.self_attn.attention_output + wrong.mlp.mlp_output - wrong.output).abs().max() > 1e-3
    assert t.resolution.at("attention_output", 0).read.words() == "the block's child module post_attention_layernorm's output"
    assert t.resolution.at("mlp_norm_output", 0).read.words() == "the child module pre_feedforward_layernorm's output"


def test_a_base_model_without_head_reports_no_logits():
    model = tiny_llama().model  # LlamaModel: hidden states out, no head
    model.set_attn_implementation("eager")
    with torch.no_grad(), atlas.trace(model) as t:
        model(input_ids=IDS)
    assert t.final_norm_output.shape == (1, 7, 32)
    assert t.input_ids.shape == (1, 7)
    with pytest.raises(atlas.MissingValue, match="no module in the role of logits"):
        t.logits
