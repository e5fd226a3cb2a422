"""RWKV-4 (RWKV/rwkv-4-169m-pile and its released sizes), against a hand derivation from its config.

Every expected figure is derived here from config.json's sizes through formulas written out by hand, as
RWKV-4's blocks lay out their weights; none is copied from the facts under test.
"""

from __future__ import annotations

import json

from tests.conftest import ROOT, released_config


def rwkv_block(d: int, inner: int, wide: int) -> int:
    """One RWKV-4 block: two LayerNorms, the time mixing and the channel mixing, no linear biases."""
    norms = 2 * 2 * d                       # ln1 and ln2: a gain and a bias each
    time = (2 * inner                       # time_decay and time_first, one per channel of the recurrence
            + 3 * d                         # time_mix_key, _value, _receptance: one weight per channel of the stream
            + 3 * d * inner                 # key, value, receptance
            + inner * d)                    # output
    channel = (2 * d                        # time_mix_key, _receptance
               + d * wide + wide * d        # key and value
               + d * d)                     # receptance
    return norms + time + channel


def rwkv_total(c: dict) -> int:
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    inner, wide = c["attention_hidden_size"], c["intermediate_size"]
    assert not c["tie_word_embeddings"]
    # the embeddings, block 0's pre_ln (gain and bias), the blocks, ln_out, and a head of its own
    return V * d + 2 * d + L * rwkv_block(d, inner, wide) + 2 * d + V * d


def test_rwkv_total_is_embeddings_blocks_and_an_untied_head(collected):
    f, c = collected("rwkv").facts, released_config("rwkv")
    total = rwkv_total(c)
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    [figure] = f["checkpoint"]["published"]["figures"]
    assert figure["figure"] == "169M" and figure["agrees"]
    assert round(total / 1e6) == 169


def test_rwkv_lists_its_sizes_from_169m_to_14b_each_exact(collected):
    rows = collected("rwkv").facts["sizes"]
    names = ["169m", "430m", "1b5", "3b", "7b", "14b"]
    assert [r["repo"] for r in rows] == [f"RWKV/rwkv-4-{n}-pile" for n in names]
    for r, name in zip(rows, names):
        c = json.loads((ROOT / "atlas/checkpoints" / r["repo"] / "config.json").read_text())
        assert c["attention_hidden_size"] == c["hidden_size"] and c["intermediate_size"] == 4 * c["hidden_size"]
        total = rwkv_total(c)
        assert r["total"] == r["active"] == total and r["kv_cache_per_token"] == 0, r["repo"]
        letter = "m" if "m" in name else "b"  # 1b5 is 1.5 billion: the letter stands for the point where digits follow it
        digits = name.rstrip(letter).replace(letter, ".")
        unit = 1e6 if letter == "m" else 1e9
        decimals = len(digits.partition(".")[2])
        assert round(total / unit, decimals) == float(digits), (r["repo"], total)


def test_rwkv_keeps_a_fixed_state_per_block_and_no_heads(collected):
    f, c = collected("rwkv").facts, released_config("rwkv")
    assert f["config"]["standardized"]["num_heads"] is None and f["sheet"]["heads"]["query"] is None
    assert not any(feature["abbreviation"] in ("NoPE", "RoPE") for feature in f["features"])
    summary = f["cost"]["summary"]
    assert summary["kv_cache_bytes_per_position"] == 0
    # per block: the recurrence's numerator, denominator and largest exponent per channel, and the last input
    # of the two token shifts, at BF16
    per_block = 3 * c["attention_hidden_size"] + 2 * c["hidden_size"]
    assert summary["kv_cache_bytes"] == c["num_hidden_layers"] * per_block * 2
    assert [k["count"] for k in f["block_kinds"]] == [1, c["num_hidden_layers"] - 1]
    # the rule, applied to the tiny model, against the block's column of the state list the model returned
    tiny = f["preview"]["config"]
    for check in (ch for ch in f["cost"]["checks"] if ch["figure"].startswith("KV cache of block")):
        assert check["formula"] == check["measured"] == 3 * tiny["ssm_inner_size"] + 2 * tiny["hidden_size"], check
        assert "state list the model returns" in check["how"]
    assert "token shift" in f["sheet"]["positions"]["words"]


def test_rwkv_steps_print_the_recurrence_and_the_gates_they_run(collected):
    f = collected("rwkv").facts
    kinds = f["equations"]["kinds"]
    assert sorted(set(kinds.values()) & {"token_shift", "time_mixing", "channel_mixing"}) == ["channel_mixing", "time_mixing", "token_shift"]
    components = f["equations"]["components"]
    mixing = next(v for k, v in components.items() if kinds.get(k) == "time_mixing")
    tex = " ".join(step["tex"] for step in mixing["steps"])
    assert r"w=-e^{\theta}" in tex and r"\operatorname{WKV}(k,v)_t" in tex and r"\sigma(" in tex
    assert r"p_t=\max(p_{t-1}+w,k_t)" in tex  # the stable form: every exponential relative to the largest so far
    channel = next(v for k, v in components.items() if kinds.get(k) == "channel_mixing")
    assert r"\operatorname{ReLU}^2(" in " ".join(step["tex"] for step in channel["steps"])
    # what the value projection reads is the run's mlp_neurons, compared with the squared ReLU's step; the gated
    # read-out is ssm_premix, what the output projection reads
    assert [s["values"] for s in channel["steps"]][2] == ["mlp_neurons"]
    assert [s["values"] for s in mixing["steps"]][-2:] == [["ssm_premix"], ["ssm_output"]]
    first = components[f["block_kinds"][0]["id"]]
    assert r"\operatorname{LayerNorm}(x)" in first["steps"][0]["tex"] and r"pre\_ln" in first["steps"][0]["tex"]
    assert all(s["expression"] for c in (mixing, channel) for s in c["steps"])


def test_rwkv_preview_halves_the_stream_and_the_page_says_so(collected):
    f, c = collected("rwkv").facts, released_config("rwkv")
    assert f["preview"]["config"]["rescale_every"] == 2 and c["rescale_every"] == 6
    words = {d["what"]: (d["tiny"], d["checkpoint"]) for d in f["preview"]["differences"]}
    assert words["rescaling"] == ("the stream halved after every 2nd block in eval mode", "the stream halved after every 6th block in eval mode")
    # measured on the run: the next block reads half of the output of every second block (block 1 of the three)
    [halved] = [i for i in f["preview"]["identities"] if i["id"] == "rescaled_stream"]
    assert halved["blocks"] == [1] and halved["holds"] and halved["max_abs_residual"] == 0
    blocks = " ".join(step["tex"] for step in f["equations"]["components"]["blocks"]["steps"])
    assert r"after every 6th block (rescale\_every) the model halves the stream" in blocks


def test_rwkv_config_words_speak_of_its_mixings_and_state():
    from atlas.model import config_words

    path = ROOT / "atlas/checkpoints/RWKV/rwkv-4-169m-pile/config.json"
    raw = json.loads(path.read_text())
    words = config_words.explain_config(raw, str(path))
    assert "time mixing" in words["attention_hidden_size"] and f"{raw['attention_hidden_size']:,}" in words["attention_hidden_size"]
    assert "channel mixing" in words["intermediate_size"] and "MLP" not in words["intermediate_size"]
    assert "state" in words["use_cache"] and "key/value" not in words["use_cache"]
    last = raw["num_hidden_layers"] - 1
    assert f"every {raw['rescale_every']}th block" in words["rescale_every"]
    assert f"blocks {raw['rescale_every']} to {last}" in words["rescale_every"]
    assert "CUDA kernel" in words["context_length"]
