"""A family's released sizes: each counted exactly from its own config.json, against a hand derivation
from that file's sizes and against the vendor's published count at the vendor's rounding; the table
on the family page; a size whose config.json is broken stops the build naming the file and the key."""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT, run_build, snapshot
from tests.test_families import gqa_attention, sizes, swiglu, vocabulary_matrices

# The vendors' own counts, as their model cards state them (Qwen3's cards: "Number of Parameters";
# Meta's Llama 3.1 card: the three sizes by name), each with the digits the vendor gives.
QWEN3_PUBLISHED = {"Qwen/Qwen3-0.6B": 0.6, "Qwen/Qwen3-1.7B": 1.7, "Qwen/Qwen3-4B": 4.0, "Qwen/Qwen3-8B": 8.2,
                   "Qwen/Qwen3-14B": 14.8, "Qwen/Qwen3-32B": 32.8}
LLAMA_PUBLISHED = {"meta-llama/Llama-3.1-8B": 8, "meta-llama/Llama-3.1-70B": 70, "meta-llama/Llama-3.1-405B": 405}


def config_of(repo: str) -> dict:
    return json.loads((ROOT / "atlas" / "checkpoints" / repo / "config.json").read_text(encoding="utf-8"))


def dense_total(c: dict, qk_norm: bool) -> int:
    """A pre-norm decoder without biases: the vocabulary matrices, the final norm, and per block the
    attention (with a q and a k norm one head wide where the family has them), a SwiGLU MLP, two norms."""
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c.get("attention_bias") and not c.get("mlp_bias")
    block = gqa_attention(d, H, KV, hd) + (2 * hd if qk_norm else 0) + swiglu(d, F) + 2 * d
    return vocabulary_matrices(c) * V * d + d + L * block


def kv_bytes_per_token(c: dict) -> int:
    _, _, L, _, KV, hd, _ = sizes(c)
    return L * 2 * KV * hd * 2  # keys and values, every block, 2 bytes each at BF16


def test_qwen3_lists_its_six_dense_sizes_each_exact(collected):
    everything = collected("qwen3").facts["sizes"]
    rows = [r for r in everything if r["built_as"] is None]
    # the two mixtures of the same release stand beside them, built by their own class (checked in the qwen3_moe test)
    assert [(r["repo"], r["built_as"]) for r in everything if r["built_as"]] == [
        ("Qwen/Qwen3-30B-A3B", "Qwen3MoeForCausalLM"), ("Qwen/Qwen3-235B-A22B", "Qwen3MoeForCausalLM")]
    moe = {r["repo"]: (r["total"], r["active"]) for r in collected("qwen3_moe").facts["sizes"]}
    assert {r["repo"]: (r["total"], r["active"]) for r in everything if r["built_as"]} == moe
    assert [r["repo"] for r in rows] == list(QWEN3_PUBLISHED)  # smallest first, the drawn 8B among them
    assert [r["drawn"] for r in rows] == [r["repo"] == "Qwen/Qwen3-8B" for r in rows]
    for r in rows:
        c = config_of(r["repo"])
        total = dense_total(c, qk_norm=True)
        assert r["total"] == r["active"] == total, r["repo"]
        assert r["layers"] == c["num_hidden_layers"] and r["width"] == c["hidden_size"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c), r["repo"]
        assert round(total / 1e9, 1) == QWEN3_PUBLISHED[r["repo"]], r["repo"]
    # the 0.6B file stores its tied head a second time, and its pinned headers say so: 2 bytes a value, V × d twice
    small = rows[0]
    c = config_of(small["repo"])
    assert small["headers_checked"] > 0 and small["bytes_by_dtype"] == {"BF16": 2 * (small["total"] + c["vocab_size"] * c["hidden_size"])}
    assert rows[-1]["bytes_by_dtype"] == {"BF16": 2 * rows[-1]["total"]}  # the 32B: a separate head, stored once


def test_llama_3_1_lists_8b_70b_and_405b(collected):
    rows = collected("llama").facts["sizes"]
    assert [r["repo"] for r in rows] == list(LLAMA_PUBLISHED)
    for r in rows:
        c = config_of(r["repo"])
        assert r["total"] == dense_total(c, qk_norm=False), r["repo"]
        # Meta's sizes are nominal names, not rounded counts: each lies within 1 % of its name (70.55 B for "70B")
        assert abs(r["total"] / 1e9 - LLAMA_PUBLISHED[r["repo"]]) < 0.01 * LLAMA_PUBLISHED[r["repo"]], r["repo"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c)
    # 405B: 126 blocks × 8 KV heads × 128 wide × 2 (keys, values) × 2 bytes
    assert rows[-1]["kv_cache_per_token"] == 126 * 8 * 128 * 2 * 2 == 516_096


def gemma3_total(c: dict) -> int:
    """Gemma 3's text model: a tied vocabulary matrix, and per block a grouped-query attention with a q and
    a k norm one head wide, a GELU-gated MLP (three matrices, as SwiGLU's) and four norms (before and after
    each sublayer), then the final norm."""
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and c.get("tie_word_embeddings", True)
    return V * d + d + L * (gqa_attention(d, H, KV, hd) + 2 * hd + swiglu(d, F) + 4 * d)


def test_gemma_3_lists_1b_4b_12b_27b_counting_the_text_model_of_each_wrapper(collected):
    rows = collected("gemma3").facts["sizes"]
    assert [r["repo"] for r in rows] == [f"google/gemma-3-{n}-it" for n in ("1b", "4b", "12b", "27b")]
    for r in rows:
        whole = config_of(r["repo"])
        c = whole.get("text_config", whole)  # the 4B and up are Gemma3ForConditionalGeneration's files
        assert r["text_model_of"] == ("the file's text_config" if "text_config" in whole else None), r["repo"]
        total = gemma3_total(c)
        assert r["total"] == r["active"] == total, r["repo"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c), r["repo"]
        # the wrapper names the dtype once, beside text_config: bfloat16, 2 bytes a value, the tied head once
        assert r["bytes_by_dtype"] == {"BF16": 2 * total}, r["repo"]
        # Google names each size by its whole model, the vision tower (about 0.4 B) included: the text model
        # lies under the name and within 0.45 B of it (1B: 1.00, 4B: 3.88, 12B: 11.77, 27B: 27.01)
        named = float(r["repo"].split("-")[2][:-1])
        assert named - 0.45 < total / 1e9 <= named + 0.01, r["repo"]


def test_exaone_lists_the_three_sizes_of_exaone_3_5_beside_its_first_release(collected):
    """EXAONE's files name Llama's sizes under GPT-2's keys (num_layers); the cards count without the
    vocabulary matrices ("Number of Parameters (without embeddings)"), so ours at their digits differs by
    exactly those matrices, and the build says why."""
    rows = collected("exaone").facts["sizes"]
    assert [r["repo"] for r in rows] == ["LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct", "LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct",
                                         "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct", "LGAI-EXAONE/EXAONE-3.5-32B-Instruct"]
    without_embeddings = {"2.4B": 2.14, "3.5-7.8B": 6.98, "32B": 30.95}  # the EXAONE 3.5 cards
    for r in rows:
        c = config_of(r["repo"])
        d, H, KV, L, F, V = (c[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_layers", "intermediate_size", "vocab_size"))
        hd = c.get("head_dim", d // H)
        matrices = (1 if c["tie_word_embeddings"] else 2) * V * d
        total = matrices + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
        assert r["total"] == r["active"] == total and r["layers"] == L, r["repo"]
        assert r["kv_cache_per_token"] == L * 2 * KV * hd * 2, r["repo"]
        card = next((v for k, v in without_embeddings.items() if r["repo"].endswith(k + "-Instruct")), None)
        if card is not None:
            assert round((total - matrices) / 1e9, 2) == card, r["repo"]
            [figure] = r["published"]["figures"]
            assert figure["figure"] == f"{card}B" and not figure["agrees"] and r["published"]["differs"]
    assert rows[0]["total"] == 2_405_327_360 and rows[0]["bytes_by_dtype"] == {"BF16": 2 * rows[0]["total"]}  # the tied head stored once


def test_qwen3_moe_lists_235b_a22b_beside_30b_a3b(collected):
    """Every block a mixture of 128 SwiGLU experts, 8 per token, with q/k norms one head wide; Qwen's cards:
    "30.5B in total and 3.3B activated", "235B in total and 22B activated"."""
    rows = collected("qwen3_moe").facts["sizes"]
    assert [r["repo"] for r in rows] == ["Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, H, KV, hd, _ = sizes(c)
        E, k, Fe = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"]
        assert not c["mlp_only_layers"] and c["decoder_sparse_step"] == 1 and not c["tie_word_embeddings"]
        block = gqa_attention(d, H, KV, hd) + 2 * hd + E * d + E * swiglu(d, Fe) + 2 * d  # attention, q/k norms, router, experts, norms
        total = 2 * V * d + d + L * block
        active = total - L * (E - k) * swiglu(d, Fe)
        assert (r["total"], r["active"]) == (total, active), r["repo"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c), r["repo"]
    big = rows[1]
    assert round(big["total"] / 1e9) == 235 and round(big["active"] / 1e9) == 22
    assert [f["agrees"] for f in big["published"]["figures"]] == [True, True]
    small = rows[0]["published"]
    # 3,353,032,704 is 3.4B rounded: the card's 3.3B is it cut to one decimal, and checkpoint.json says so
    assert [f["ours"] for f in small["figures"]] == ["30.5B", "3.4B"] and int(rows[0]["active"] / 1e8) == 33 and small["differs"]


def test_gemma_2_lists_2b_9b_and_27b_each_exact(collected):
    """Gemma 2's blocks: attention, a GeGLU MLP, four RMS norms (before and after each sublayer), the head
    tied to the embedding; the 2B's name cuts its 2.61B down, the others round to theirs."""
    rows = collected("gemma2").facts["sizes"]
    assert [r["repo"] for r in rows] == ["google/gemma-2-2b", "google/gemma-2-9b", "google/gemma-2-27b"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, H, KV, hd, F = sizes(c)
        total = V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 4 * d)
        assert r["total"] == total and r["layers"] == L, r["repo"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c), r["repo"]
    assert [round(r["total"] / 1e8) / 10 for r in rows] == [2.6, 9.2, 27.2]
    assert [[f["agrees"] for f in r["published"]["figures"]] for r in rows] == [[False], [True], [True]]


def test_phi_3_lists_medium_beside_mini(collected):
    """Phi-3's fused qkv and gate/up projections hold the same values as separate ones; the report's
    3.8B (mini) and 14B (medium)."""
    rows = collected("phi3").facts["sizes"]
    assert [r["repo"] for r in rows] == ["microsoft/Phi-3-mini-4k-instruct", "microsoft/Phi-3-medium-4k-instruct"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, H, KV, hd, F = sizes(c)
        assert r["total"] == 2 * V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d), r["repo"]
        assert r["kv_cache_per_token"] == kv_bytes_per_token(c), r["repo"]
    assert [[f["agrees"] for f in r["published"]["figures"]] for r in rows] == [[True], [True]]


def test_pythia_lists_70m_to_12b_each_exact_and_the_papers_non_embedding_counts(collected):
    """GPT-NeoX blocks with biases everywhere and parallel attention and MLP; the Pythia paper's table
    counts each model without its two vocabulary matrices."""
    paper = {"70m": 18_915_328, "160m": 85_056_000, "410m": 302_311_424, "1b": 805_736_448, "1.4b": 1_208_602_624,
             "2.8b": 2_517_652_480, "6.9b": 6_444_163_072}
    rows = collected("pythia").facts["sizes"]
    assert [r["repo"].split("-")[-1] for r in rows] == [*paper, "12b"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
        block = (d * 3 * d + 3 * d) + (d * d + d) + (d * F + F + F * d + d) + 4 * d  # qkv, dense, MLP (with biases), two LayerNorms
        body = L * block + 2 * d  # and the final LayerNorm
        assert r["total"] == 2 * V * d + body, r["repo"]
        name = r["repo"].split("-")[-1]
        if name in paper:
            assert body == paper[name] and r["published"]["differs"], r["repo"]
    assert rows[-1]["published"]["figures"][0]["agrees"]  # 11.85B: the name's 12B
def biased_block(d: int, ffn: int) -> int:
    """A GPT-2 or BLOOM block: two LayerNorms, fused qkv and output projections, an MLP, biases throughout."""
    return 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * ffn + ffn) + (ffn * d + d)


def test_gpt2_and_bloom_list_their_sizes_each_exact(collected):
    gpt2 = collected("gpt2").facts["sizes"]
    assert [r["repo"] for r in gpt2] == ["openai-community/gpt2", "openai-community/gpt2-medium", "openai-community/gpt2-large", "openai-community/gpt2-xl"]
    for r in gpt2:
        c = config_of(r["repo"])
        V, d, L, P = c["vocab_size"], c["n_embd"], c["n_layer"], c["n_positions"]
        assert r["total"] == V * d + P * d + L * biased_block(d, 4 * d) + 2 * d, r["repo"]  # tied head, learned positions, ln_f
    # the widely quoted counts of GPT-2 medium, large and XL
    assert [r["total"] for r in gpt2[1:]] == [354_823_168, 774_030_080, 1_557_611_200]
    bloom = collected("bloom").facts["sizes"]
    assert [r["repo"].split("/")[1] for r in bloom] == ["bloom-560m", "bloom-1b1", "bloom-1b7", "bloom-3b", "bloom-7b1", "bloom"]
    for r in bloom:
        c = config_of(r["repo"])
        V, d, L = c["vocab_size"], c["n_embed"], c["n_layer"]
        assert r["total"] == V * d + 2 * d + L * biased_block(d, 4 * d) + 2 * d, r["repo"]  # the embedding's LayerNorm, ln_f
        assert r["kv_cache_per_token"] == L * 2 * d * 2, r["repo"]
    assert all(f["agrees"] for r in bloom for f in r["published"]["figures"])


def test_mixtral_and_gemma_list_their_other_size(collected):
    mixtral = collected("mixtral").facts["sizes"]
    assert [r["repo"] for r in mixtral] == ["mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1"]
    for r in mixtral:
        c = config_of(r["repo"])
        V, d, L, H, KV, hd, F = sizes(c)
        E, k = c["num_local_experts"], c["num_experts_per_tok"]
        block = gqa_attention(d, H, KV, hd) + E * d + E * swiglu(d, F) + 2 * d  # attention, router, experts, norms
        total = 2 * V * d + d + L * block
        assert (r["total"], r["active"]) == (total, total - L * (E - k) * swiglu(d, F)), r["repo"]
    assert [[f["agrees"] for f in r["published"]["figures"]] for r in mixtral] == [[True, True], [True, True]]  # 46.7B/12.9B, 141B/39B
    gemma = collected("gemma").facts["sizes"]
    assert [r["repo"] for r in gemma] == ["google/gemma-2b", "google/gemma-7b"]
    for r in gemma:
        c = config_of(r["repo"])
        V, d, L, H, KV, hd, F = sizes(c)
        assert r["total"] == V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d), r["repo"]  # tied head
    assert gemma[0]["total"] == 2_506_172_416 and gemma[0]["kv_cache_per_token"] == 18 * 2 * 1 * 256 * 2  # one key/value head


def test_opt_lists_125m_to_66b_each_exact(collected):
    """OPT's pre-norm sizes: biased attention and ReLU MLP, learned positions with OPT's offset of 2 rows."""
    rows = collected("opt").facts["sizes"]
    assert [r["repo"].split("-")[-1] for r in rows] == ["125m", "1.3b", "2.7b", "6.7b", "13b", "30b", "66b"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, F, P = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["ffn_dim"], c["max_position_embeddings"]
        assert c["do_layer_norm_before"] and c["word_embed_proj_dim"] == d
        block = 4 * (d * d + d) + 2 * d + (d * F + F) + (F * d + d) + 2 * d
        assert r["total"] == V * d + (P + 2) * d + L * block + 2 * d, r["repo"]
    assert [r["total"] for r in rows[:4]] == [125_239_296, 1_315_758_080, 2_651_596_800, 6_658_473_984]


def test_deepseek_v2_lists_236b_beside_lite(collected):
    """Latent attention (a query latent at 236B, none in Lite) and mixtures with shared experts after one
    dense block; DeepSeek's paper: 236B in total, 21B activated for each token."""
    rows = collected("deepseek_v2").facts["sizes"]
    assert [r["repo"] for r in rows] == ["deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V2"]
    for r in rows:
        c = config_of(r["repo"])
        V, d, L, H = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
        q_rank, kv_rank, nope, rope, v = c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        E, k, S, Fe, F, dense = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"], c["intermediate_size"], c["first_k_dense_replace"]
        queries = (d * q_rank + q_rank + q_rank * H * (nope + rope)) if q_rank else d * H * (nope + rope)
        attention = queries + d * (kv_rank + rope) + kv_rank + kv_rank * H * (nope + v) + H * v * d
        mixture = E * swiglu(d, Fe) + swiglu(d, S * Fe) + E * d  # routed experts, the shared ones as one MLP, the router
        total = 2 * V * d + d + dense * (attention + swiglu(d, F) + 2 * d) + (L - dense) * (attention + mixture + 2 * d)
        assert (r["total"], r["active"]) == (total, total - (L - dense) * (E - k) * swiglu(d, Fe)), r["repo"]
    assert [f["agrees"] for f in rows[1]["published"]["figures"]] == [True, True]


def test_a_family_without_sizes_has_none(collected):
    assert collected("gptj").facts["sizes"] == []


def test_the_family_page_shows_every_size(tmp_path):
    out = tmp_path / "site"
    result = run_build(ROOT, "--family", "llama", "--out", str(out))
    assert result.returncode == 0, result.stderr
    page = (out / "llama" / "index.html").read_text(encoding="utf-8")
    section = page.split('<section id="sizes">')[1].split("</section>")[0]
    rows = re.findall(r"<tr(?: class=\"drawn\")?><td><code>([^<]+)</code>(.*?)</tr>", section, re.S)
    assert [repo for repo, _ in rows] == list(LLAMA_PUBLISHED)
    assert "(this page)" in rows[0][1] and "(this page)" not in rows[1][1]
    total = dense_total(config_of("meta-llama/Llama-3.1-405B"), qk_norm=False)
    assert f"{total:,}" in rows[2][1]
    assert '<a href="#sizes">Sizes</a>' in page
    # the fact sheet names the sizes and leads to the table: 8B (8.03 B) to 405B (406 B)
    sheet = page[page.index('<dl class="sheet'):page.index("</dl>", page.index('<dl class="sheet'))]
    assert re.search(r'<dt>sizes</dt><dd><a href="#sizes">3 checkpoints, 8\.03 B to 406 B</a></dd>', sheet), sheet[-400:]


def test_a_broken_size_config_stops_the_build_naming_its_file(project_copy):
    out = project_copy / "site"
    first = run_build(project_copy, "--family", "llama", "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    path = project_copy / "atlas" / "checkpoints" / "meta-llama" / "Llama-3.1-70B" / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["num_key_value_heads"] = "eight"
    path.write_text(json.dumps(config), encoding="utf-8")
    result = run_build(project_copy, "--family", "llama", "--out", str(out))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: ") and "atlas/checkpoints/meta-llama/Llama-3.1-70B/config.json" in lines[0], lines[0]
    assert "num_key_value_heads: LlamaConfig rejects it: must be int, not str 'eight'" in lines[0], lines[0]
    assert snapshot(out) == before  # the previous site is left as it was
