"""Linear attention with a recurrent state (gated DeltaNet), each family against a hand derivation.

As in tests/test_families.py, every expected figure is derived here from the sizes in the family's
config.json (read from the file) through a formula written out by hand; the settings a formula relies
on (no biases, an untied head, which blocks are which) are asserted in the file first. The step
library's delta rule is also checked against transformers' own recurrent implementation on random
tensors, and the cost rule against the rule's meaning (a state does not grow with the context).
"""

from __future__ import annotations

import pytest

from atlas.cost.coefficients import cache_values_at
from tests.conftest import released_config

BYTES = {"bfloat16": 2, "float32": 4}


def model_total(facts):
    return facts["accounting"]["model"]["total"]


def stored(facts):
    return facts["checkpoint_check"]["predicted"]


def swiglu(d, ffn):
    return 3 * d * ffn  # gate, up, down


# --- Qwen3-Next 80B-A3B ---------------------------------------------------------------------------


def gated_delta_net(d, key_heads, value_heads, key_dim, value_dim, kernel):
    """Qwen3-Next's linear-attention mixer: its tensors, written out."""
    qkvz = d * (2 * key_heads * key_dim + 2 * value_heads * value_dim)  # queries, keys, values, output gates
    ba = d * 2 * value_heads  # write strength and decay inputs, one each per value head
    conv = (2 * key_heads * key_dim + value_heads * value_dim) * kernel  # one filter per q/k/v channel, no bias
    per_head = 2 * value_heads  # A_log and dt_bias
    norm = value_dim  # the gated RMSNorm's gain, shared by the heads
    out = value_heads * value_dim * d
    return qkvz + ba + conv + per_head + norm + out


def gated_attention(d, heads, kv_heads, head_dim):
    """Full attention with an output gate: the query projection is twice as wide; q/k norms per head."""
    return d * 2 * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d + 2 * head_dim


def test_qwen3_next(collected):
    f, c = collected("qwen3_next").facts, released_config("qwen3_next")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    E, K, Fe, Fs = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    hk, hv, dk, dv = c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"]
    kernel, every = c["linear_conv_kernel_dim"], c["full_attention_interval"]
    # the settings the formula relies on: no attention bias (the class default, not in the file), an
    # untied head, every block a mixture, and a full-attention block every `every` blocks
    assert "attention_bias" not in c and not c["tie_word_embeddings"]
    assert c["decoder_sparse_step"] == 1 and c["mlp_only_layers"] == []
    full = [i for i in range(L) if (i + 1) % every == 0]
    linear = [i for i in range(L) if i not in full]
    moe = E * d + E * swiglu(d, Fe) + swiglu(d, Fs) + d  # router, experts, shared expert, its one-output gate
    norms = 2 * d
    total = (2 * V * d + d + len(linear) * (gated_delta_net(d, hk, hv, dk, dv, kernel) + moe + norms)
             + len(full) * (gated_attention(d, H, KV, hd) + moe + norms))
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, Fe)
    # tensors as stored: one per expert and projection; 7 linear-mixer tensors, 6 attention tensors
    per_block = 2 + 1 + 3 * E + 3 + 1
    assert stored(f)["tensors"] == 3 + len(linear) * (7 + per_block) + len(full) * (6 + per_block)

    kinds = {k["attention_type"]: k for k in f["block_kinds"]}
    assert kinds["linear_attention"]["indices"] == linear and kinds["full_attention"]["indices"] == full
    # the preview keeps one whole period of the pattern
    assert f["preview"]["config"]["num_hidden_layers"] == every

    # what the proof read from the linear mixer's structure
    mixer = f["equations"]["components"][f"{kinds['linear_attention']['id']}.linear_attn"]
    assert mixer["facts"]["heads"]["value"] == {"key": hk, "value": hv, "key_dim": dk, "value_dim": dv}
    assert mixer["facts"]["conv_kernel"]["value"] == kernel
    assert f["equations"]["kinds"][f"{kinds['linear_attention']['id']}.linear_attn.conv1d"] == "depthwise_conv"
    assert f["equations"]["kinds"][f"{kinds['linear_attention']['id']}.linear_attn.norm"] == "gated_norm"
    attention = f["equations"]["components"][f"{kinds['full_attention']['id']}.self_attn"]
    assert attention["facts"]["output_gate"]["value"] is True

    # the cache: a linear block holds its state and the convolution's last inputs, at any context
    state = hv * dk * dv + (2 * hk * dk + hv * dv) * kernel
    cache_kinds = {k["attention"]: k for k in f["cost"]["cache"]["kinds"]}
    assert cache_kinds["linear"]["values"] == state and cache_kinds["linear"]["cap"] == 1
    assert cache_kinds["full"]["values"] == 2 * KV * hd and cache_kinds["full"]["cap"] is None
    at = lambda n: cache_values_at(f["cost"]["cache"]["kinds"], n)  # noqa: E731
    assert at(2000) - at(1000) == len(full) * 2 * KV * hd * 1000  # only the attention blocks grow
    # every rule matched what the preview run measured
    assert all(ch["formula"] == ch["measured"] for ch in f["cost"]["checks"])


def test_qwen3_next_support_rows(collected):
    f = collected("qwen3_next").facts
    attn = next(h for h in f["support"]["hosts"] if h["host"] == "layers[i].self_attn")
    rows = {v["name"]: v for v in attn["values"]}
    linear = next(k for k in f["block_kinds"] if k["attention_type"] == "linear_attention")["indices"]
    full = next(k for k in f["block_kinds"] if k["attention_type"] == "full_attention")["indices"]
    c = released_config("qwen3_next")
    assert rows["linear_attention_state"]["blocks"] == linear
    assert rows["linear_attention_state"]["shape"] == ["batch", c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"]]
    assert rows["linear_attention_beta"]["shape"] == ["batch", "seq", c["linear_num_value_heads"]]
    assert rows["attention_probabilities"]["blocks"] == full
    assert rows["attention_output"]["blocks"] == sorted(linear + full)


# --- the delta rule of the step library, against transformers' own loop ---------------------------


@pytest.mark.parametrize("share", [1, 2])
def test_delta_rule_matches_transformers_recurrent_loop(share):
    import torch
    from transformers.models.qwen3_next import modeling_qwen3_next as reference

    from atlas.proof.linear import delta_rule, l2_normalized

    torch.manual_seed(0)
    B, T, hk, dk, dv = 1, 7, 2, 8, 4
    hv = hk * share
    q, k = torch.randn(B, T, hk, dk, dtype=torch.float64), torch.randn(B, T, hk, dk, dtype=torch.float64)
    v = torch.randn(B, T, hv, dv, dtype=torch.float64)
    g, beta = -torch.rand(B, T, hv, dtype=torch.float64), torch.rand(B, T, hv, dtype=torch.float64)
    want, want_state = reference.torch_recurrent_gated_delta_rule(q, k, v, g, beta, output_final_state=True,
                                                                  use_qk_l2norm_in_kernel=True)
    qn = (l2_normalized(q) / dk ** 0.5).repeat_interleave(share, 2)
    kn = l2_normalized(k).repeat_interleave(share, 2)
    got, state = delta_rule(qn, kn, v, g, beta)
    torch.testing.assert_close(got, want.to(got.dtype))
    torch.testing.assert_close(state, want_state.to(state.dtype))
    # and it fails where it should: a decay left out changes the state
    _, undecayed = delta_rule(qn, kn, v, torch.zeros_like(g), beta)
    assert not torch.allclose(undecayed, state)


# --- Kimi Linear 48B-A3B ----------------------------------------------------------------------------


def kimi_delta_attention(d, heads, head_dim, kernel):
    """Kimi delta attention: its tensors, written out."""
    inner = heads * head_dim
    qkv = 3 * d * inner
    conv = 3 * inner * kernel  # one filter per q/k/v channel, no bias
    forget = d * head_dim + head_dim * inner + inner + heads  # low-rank f_a, f_b; dt_bias per channel; A_log per head
    beta = d * heads
    gate = d * head_dim + head_dim * inner  # low-rank output gate
    return qkv + conv + forget + beta + gate + head_dim + inner * d  # + the gated norm's gain, the output projection


def latent_attention_without_query_latent(d, heads, kv_rank, nope, rope, v):
    return d * heads * (nope + rope) + d * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v) + heads * v * d


def test_kimi_linear(collected):
    f, c = collected("kimi_linear").facts, released_config("kimi_linear")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    lin = c["linear_attn_config"]
    heads, head_dim, kernel = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    E, K, Fe, F = c["num_experts"], c["num_experts_per_token"], c["moe_intermediate_size"], c["intermediate_size"]
    shared = c["num_shared_experts"] * Fe
    # settings the formula relies on: no query latent, no attention bias (class default), an untied head,
    # one dense block first, then a mixture every block
    assert c["q_lora_rank"] is None and "attention_bias" not in c and not c["tie_word_embeddings"]
    assert c["first_k_dense_replace"] == 1 and c["moe_layer_freq"] == 1
    full = [n - 1 for n in lin["full_attn_layers"]]  # the file counts layers from one
    linear = [n - 1 for n in lin["kda_layers"]]
    assert sorted(full + linear) == list(range(L))
    attention = {i: kimi_delta_attention(d, heads, head_dim, kernel) for i in linear}
    attention |= {i: latent_attention_without_query_latent(d, c["num_attention_heads"], c["kv_lora_rank"], c["qk_nope_head_dim"],
                                                           c["qk_rope_head_dim"], c["v_head_dim"]) for i in full}
    # router weight and its selection bias (a persistent buffer, counted with the weights), experts, shared expert
    moe = E * d + E + E * swiglu(d, Fe) + swiglu(d, shared)
    ffn = {i: (swiglu(d, F) if i == 0 else moe) for i in range(L)}
    total = 2 * V * d + d + sum(attention[i] + ffn[i] + 2 * d for i in range(L))
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["stored_buffers"] == (L - 1) * E
    assert f["accounting"]["model"]["active"] == total - (L - 1) * (E - K) * swiglu(d, Fe)

    kinds = {(k["attention_type"], k["mixture"]): k for k in f["block_kinds"]}
    assert kinds[("linear_attention", False)]["indices"] == [0]
    assert kinds[("linear_attention", True)]["indices"] == linear[1:]
    assert kinds[("full_attention", True)]["indices"] == full
    mixer_id = f"{kinds[('linear_attention', True)]['id']}.self_attn"
    assert f["equations"]["kinds"][mixer_id] == "linear_attention"
    assert f["equations"]["kinds"][f"{mixer_id}.forget_gate"] == "decay_gate"
    assert f["equations"]["kinds"][f"{mixer_id}.o_norm"] == "gated_norm"
    assert f["equations"]["components"][f"{mixer_id}.o_norm"]["facts"]["gated_norm"]["value"] == "sigmoid_gain"
    mla = f["equations"]["components"][f"{kinds[('full_attention', True)]['id']}.self_attn"]
    assert mla["facts"]["positions"]["value"] == "none inside the attention"

    # the decay is per key channel: the per-head decay has no block, the per-channel one every linear block
    attn = next(h for h in f["support"]["hosts"] if h["host"] == "layers[i].self_attn")
    rows = {v["name"]: v for v in attn["values"]}
    assert "linear_attention_decay" not in rows
    assert rows["linear_attention_channel_decay"]["blocks"] == linear
    assert rows["linear_attention_channel_decay"]["shape"] == ["batch", "seq", heads, head_dim]

    state = heads * head_dim * head_dim + 3 * heads * head_dim * kernel
    cache_kinds = {k["kind"]: k for k in f["cost"]["cache"]["kinds"]}
    assert cache_kinds[kinds[("linear_attention", True)]["id"]]["values"] == state
    assert cache_kinds[kinds[("full_attention", True)]["id"]]["values"] == c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert all(ch["formula"] == ch["measured"] for ch in f["cost"]["checks"])


# --- the other gated DeltaNet layout (Qwen3.5: separate projections), proven on a module of its own ----


def test_gated_delta_net_with_separate_projections_reproduces_its_module():
    """No family here runs Qwen3.5's layout yet; its chain is run on a tiny Qwen3_5GatedDeltaNet, on its
    own call, as a family's proof would run it, and a wrong decay must fail it."""
    import torch
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    from atlas.proof.core import Call, Context, Part, reproduce
    from atlas.proof.library import chain_of
    from atlas.proof.steps import Step

    config = Qwen3_5TextConfig(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                               linear_value_head_dim=8, linear_conv_kernel_dim=4, num_hidden_layers=1, layer_types=["linear_attention"])
    from atlas.model.precision import float64_run

    torch.manual_seed(0)
    with torch.no_grad(), float64_run():  # as the preview run's modules: float64 throughout
        mixer = Qwen3_5GatedDeltaNet(config, 0).eval()
        for p in mixer.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape) * 0.1)
    calls = {}

    def keeper(path):
        def keep(module, args, kwargs, out):
            calls.setdefault(path, Call(args, kwargs, out))  # the first call; the hook returns nothing
        return keep

    hooks = [m.register_forward_hook(keeper(path), with_kwargs=True) for path, m in mixer.named_modules()]
    with torch.no_grad(), float64_run():
        x = torch.randn(1, 9, 32)
        mixer(x)
    for h in hooks:
        h.remove()

    class Family:
        name = "test"

    ctx = Context(Family(), config, config, calls, None, None)
    part = Part("mixer", "", mixer, mixer, ctx)
    chain = chain_of(part)
    assert part.ctx.parts["mixer.norm"].facts["gated_norm"]["value"] == "silu_gain"
    result = reproduce(part, chain)
    assert result["reproduced"], result
    # the decay step swapped for one without the decay: the proof no longer reproduces the module
    at = next(i for i, s in enumerate(chain.steps) if s.out == "g")
    wrong = Step(chain.steps[at].tex, "g", lambda e: torch.zeros_like(e["b"]))
    broken = type(chain)(chain.steps[:at] + [wrong] + chain.steps[at + 1:], chain.inputs, chain.output)
    assert not reproduce(part, broken)["reproduced"]
