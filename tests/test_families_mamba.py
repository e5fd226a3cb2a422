"""Mamba (state-spaces/mamba-130m-hf): an attention-free stack, against a hand derivation from its config.

Every expected figure is derived here from config.json's sizes through formulas written out by hand, as
the reference Mamba block lays its weights out; none is copied from the facts under test.
"""

from __future__ import annotations

from tests.conftest import released_config


def mamba_mixer(d: int, inner: int, state: int, conv: int, rank: int) -> int:
    """One Mamba mixer without linear biases (use_bias false) and with a convolution bias (use_conv_bias)."""
    return (d * 2 * inner               # in_proj: the scan input and the gate
            + inner * conv + inner      # the depthwise causal convolution and its bias
            + inner * (rank + 2 * state)  # x_proj: the time step's low rank, B and C
            + rank * inner + inner      # dt_proj widens the time step back, with a bias
            + inner * state + inner     # A_log and D
            + inner * d)                # out_proj


def test_mamba_total_is_embeddings_and_mixers_with_a_tied_head(collected):
    f, c = collected("mamba").facts, released_config("mamba")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    inner, state, conv, rank = c["expand"] * d, c["state_size"], c["conv_kernel"], c["time_step_rank"]
    assert c["tie_word_embeddings"] and not c["use_bias"] and c["use_conv_bias"]
    assert rank == -(-d // 16) and c["intermediate_size"] == inner  # the reference block's own rules
    block = d + mamba_mixer(d, inner, state, conv, rank)  # an RMSNorm and the mixer
    total = V * d + L * block + d  # the embedding (the head shares it), the blocks, norm_f
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    # the released model's name: about 130 million
    assert round(total / 1e7) == 13


def test_mamba_has_no_attention_no_positions_and_a_fixed_state(collected):
    f, c = collected("mamba").facts, released_config("mamba")
    sizes = f["config"]["standardized"]
    assert sizes["num_heads"] is None and sizes["num_kv_heads"] is None
    assert [k["count"] for k in f["block_kinds"]] == [c["num_hidden_layers"]]
    # no attention is not "no positions given to the attention": there is no NoPE to claim
    assert not any(feature["abbreviation"] == "NoPE" for feature in f["features"])
    inner = c["expand"] * c["hidden_size"]
    summary = f["cost"]["summary"]
    assert summary["kv_cache_bytes_per_position"] == 0
    # each block keeps conv_kernel inputs of the convolution and state_size values per inner channel, at BF16
    assert summary["kv_cache_bytes"] == c["num_hidden_layers"] * (inner * c["conv_kernel"] + inner * c["state_size"]) * 2
    assert f["sheet"]["heads"]["query"] is None


def test_mamba_preview_is_an_attention_free_tiny_stack(collected):
    preview = collected("mamba").facts["preview"]
    tiny = preview["config"]
    assert tiny["num_heads"] is None and tiny["hidden_size"] < released_config("mamba")["hidden_size"]
    words = {d["what"]: d["tiny"] for d in preview["differences"]}
    assert words["mixer width"] == f"a mixer inner width of {tiny['ssm_inner_size']}" and "MLP width" not in words, words


def test_mamba_config_words_speak_of_the_mixer_not_an_mlp():
    import json

    from atlas.model import config_words
    from tests.conftest import ROOT

    path = ROOT / "atlas/checkpoints/state-spaces/mamba-130m-hf/config.json"
    raw = json.loads(path.read_text())
    words = config_words.explain_config(raw, str(path))
    inner = raw["expand"] * raw["hidden_size"]
    assert raw["intermediate_size"] == inner and f"{inner:,}" in words["intermediate_size"]
    for key in ("intermediate_size", "hidden_act", "use_bias", "use_cache"):
        said = words[key]
        assert "MLP" not in said and "key/value" not in said and ("Mamba" in said or "state" in said), (key, said)
    assert f"{raw['state_size']} values of state" in words["state_size"]


def test_falcon_mamba_is_mambas_tensors_with_an_untied_head(collected):
    f, c = collected("falcon_mamba").facts, released_config("falcon_mamba")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    inner, state, conv, rank = c["expand"] * d, c["state_size"], c["conv_kernel"], c["time_step_rank"]
    assert not c["tie_word_embeddings"] and not c["use_bias"] and c["use_conv_bias"] and c["intermediate_size"] == inner
    # the three norms inside each mixer hold no weights: a block stores exactly Mamba's tensors
    total = 2 * V * d + L * (d + mamba_mixer(d, inner, state, conv, rank)) + d
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    assert round(total / 1e7) == 727  # TII's model card: 7.27B parameters


def test_falcon_mamba_norms_are_written_at_the_checkpoints_widths(collected):
    f, c = collected("falcon_mamba").facts, released_config("falcon_mamba")
    components = f["equations"]["components"]
    for norm, width in (("dt_layernorm", c["time_step_rank"]), ("b_layernorm", c["state_size"]), ("c_layernorm", c["state_size"])):
        steps = [step["tex"] for step in components[f"state_space_block.mixer.{norm}"]["steps"]]
        assert steps[0].startswith(rf"\rho=\tfrac{{1}}{{{width}}}"), (norm, steps)
        assert "no gain" in steps[-1]
    mixer = " ".join(step["tex"] for step in components["state_space_block.mixer"]["steps"])
    # each norm printed as the one its own chain measured (a root mean square, no gain)
    assert r"B\leftarrow\operatorname{RMSNorm}(B)" in mixer and r"A=-e^{A_{\log}}" in mixer


def mamba2_mixer(d: int, heads: int, head_dim: int, groups: int, state: int, conv: int) -> int:
    """One Mamba-2 mixer without linear biases (use_bias false), with a convolution bias (use_conv_bias)."""
    inner = heads * head_dim
    conv_width = inner + 2 * groups * state  # the convolution runs over the scan input, B and C together
    return (d * (inner + conv_width + heads)  # in_proj: the gate, the convolved part, a time step per head
            + conv_width * conv + conv_width  # the depthwise causal convolution and its bias
            + 3 * heads                       # dt_bias, A_log and D: one each per head
            + inner                           # the gated norm's gain
            + inner * d)                      # out_proj


def test_mamba2_total_is_the_vendors_count_exactly(collected):
    f, c = collected("mamba2").facts, released_config("mamba2")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    heads, head_dim, groups, state = c["num_heads"], c["head_dim"], c["n_groups"], c["state_size"]
    assert heads * head_dim == c["expand"] * d and not c["tie_word_embeddings"] and not c["use_bias"]
    total = 2 * V * d + L * (d + mamba2_mixer(d, heads, head_dim, groups, state, c["conv_kernel"])) + d
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    assert total == 7_285_403_648  # the Codestral Mamba model card's count of parameters
    published = f["checkpoint"]["published"]
    [figure] = published["figures"]
    assert (figure["figure"], figure["ours"], figure["agrees"]) == ("7,285,403,648", "7,285,403,648", True)
    assert published["differs"] is None


def test_mamba2_keeps_a_state_per_head_and_no_cache_that_grows(collected):
    f, c = collected("mamba2").facts, released_config("mamba2")
    assert f["config"]["standardized"]["num_heads"] is None  # no attention heads, though the mixer has heads
    assert not any(feature["abbreviation"] == "NoPE" for feature in f["features"])
    summary = f["cost"]["summary"]
    assert summary["kv_cache_bytes_per_position"] == 0
    conv_width = c["num_heads"] * c["head_dim"] + 2 * c["n_groups"] * c["state_size"]
    per_block = conv_width * c["conv_kernel"] + c["num_heads"] * c["head_dim"] * c["state_size"]
    assert summary["kv_cache_bytes"] == c["num_hidden_layers"] * per_block * 2  # at BF16
    # Mamba2Config names no length: the sheet says no limit, not the controls' last stop
    assert "max_position_embeddings" not in c and f["sheet"]["context"]["value"] is None
    assert f["cost"]["context"] == {"default": 4096, "max": 4096, "stated": False}
    assert [a["attention"] for a in f["sheet"]["attention"]] == ["state"]


def test_mamba_lists_its_sizes_from_130m_to_2_8b_each_exact(collected):
    """The released sizes (the reference block's rules: inner width 2d, time-step rank ceil(d / 16)),
    each against the hand derivation, its name at two figures and its fixed state per block."""
    import json

    from tests.conftest import ROOT

    rows = collected("mamba").facts["sizes"]
    names = ["130m", "370m", "790m", "1.4b", "2.8b"]
    assert [r["repo"] for r in rows] == [f"state-spaces/mamba-{n}-hf" for n in names]
    for r, name in zip(rows, names):
        c = json.loads((ROOT / "atlas/checkpoints" / r["repo"] / "config.json").read_text())
        V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
        assert c["intermediate_size"] == c["expand"] * d and c["time_step_rank"] == -(-d // 16)
        total = V * d + L * (d + mamba_mixer(d, c["intermediate_size"], c["state_size"], c["conv_kernel"], c["time_step_rank"])) + d
        assert r["total"] == r["active"] == total and r["kv_cache_per_token"] == 0, r["repo"]
        named = float(name[:-1]) * (1e6 if name.endswith("m") else 1e9)
        assert float(f"{total:.2g}") == named, (r["repo"], total)
