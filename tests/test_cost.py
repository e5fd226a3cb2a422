"""What it costs to run: the cost figures against hand derivations from config.json, and the build
failing when a cost rule is broken on purpose."""

from __future__ import annotations

import pytest

from atlas.cost import figures as cost
from atlas.cost import weights
from atlas.build import publish
from tests.conftest import ROOT, released_config, run_build


def bf16(facts, context, batch=1):
    return cost.figures(facts["cost"], context, batch, "BF16")


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_latent_cache_is_the_latent_without_a_factor_of_two(collected, name):
    c = released_config(name)
    facts = collected(name).facts
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 70,272 bytes per position
    per_position = c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    assert per_position == 70_272
    assert bf16(facts, 4096)["per_token"] == per_position
    assert bf16(facts, 4096, batch=3)["cache"] == per_position * 4096 * 3
    # what a cache of expanded heads would hold instead: per-head keys (nope + rope) and values
    heads = c["num_attention_heads"]
    expanded = c["num_hidden_layers"] * heads * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"] + c["v_head_dim"]) * 2
    assert bf16(facts, 4096)["expanded_per_token"] == expanded
    assert facts["cost"]["cache"]["latent"] is True


def test_gpt2_cache_flops_and_weights_by_hand(collected):
    c = released_config("gpt2")
    facts = collected("gpt2").facts
    layers, width, vocab, inner = c["n_layer"], c["n_embd"], c["vocab_size"], 4 * c["n_embd"]
    head_dim = width // c["n_head"]
    assert bf16(facts, 1024)["per_token"] == layers * 2 * width * 2 == 36_864
    # the matrices a token meets in a block: c_attn (width → 3 width), c_proj, c_fc (width → 4 width), c_proj back
    block_matrices = width * 3 * width + width * width + 2 * width * inner
    context = 700
    attention = 2 * c["n_head"] * context * (head_dim + head_dim)  # scores against each key, and its value back
    expected = layers * (2 * block_matrices + attention) + 2 * vocab * width
    assert bf16(facts, context)["flops"] == expected
    total = facts["accounting"]["model"]["total"]
    assert facts["cost"]["weights"][1]["bytes"] == 2 * total  # BF16
    # FP8: the block matrices at one byte with an F32 scale per 128 × 128 block, the rest at two bytes
    shapes = [(width, 3 * width), (width, width), (width, inner), (inner, width)]
    fp8 = layers * sum(r * k + 4 * -(-r // 128) * -(-k // 128) for r, k in shapes)
    matrices = layers * sum(r * k for r, k in shapes)
    assert facts["cost"]["weights"][2]["bytes"] == fp8 + 2 * (total - matrices)


def test_sliding_window_layers_hold_at_most_their_window(collected):
    c = released_config("mistral")
    facts = collected("mistral").facts
    window = c["sliding_window"]
    per_position = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 2
    assert bf16(facts, 1024)["cache"] == per_position * 1024
    # transformers keeps the window less the token being added between steps
    assert bf16(facts, 32768)["cache"] == per_position * (window - 1)
    flops_long, flops_longer = bf16(facts, 32768)["flops"], bf16(facts, 65536)["flops"]
    assert flops_long == flops_longer  # attention stops growing past the window


def test_gemma3_mixes_capped_and_full_layers(collected):
    c = released_config("gemma3")
    facts = collected("gemma3").facts
    kinds = {k["attention"]: k for k in facts["cost"]["cache"]["kinds"]}
    # every sliding_window_pattern-th layer attends globally, the others within the window
    full = sum(1 for i in range(c["num_hidden_layers"]) if (i + 1) % c["sliding_window_pattern"] == 0)
    sliding = c["num_hidden_layers"] - full
    per_layer = 2 * c["num_key_value_heads"] * c["head_dim"]  # head_dim from the config, not hidden / heads
    assert c["head_dim"] != c["hidden_size"] // c["num_attention_heads"]
    assert kinds["sliding"]["count"] == sliding and kinds["full"]["count"] == full
    context = 8192
    expected = (sliding * per_layer * (c["sliding_window"] - 1) + full * per_layer * context) * 2
    assert bf16(facts, context)["cache"] == expected


@pytest.mark.parametrize("name", ["gpt2", "kimi_k2", "gpt_oss"])
def test_every_rule_equals_the_preview_run(collected, name):
    checks = collected(name).facts["cost"]["checks"]
    assert {c["figure"] for c in checks} >= {"KV cache of block 0", "FLOPs of block 0", "FLOPs of the head", "active parameters"}
    for c in checks:
        assert c["formula"] == c["measured"], c


def test_active_parameters_of_kimi_k2_by_hand(kimi):
    c = released_config("kimi_k2")
    active = kimi["cost"]["active"]
    moe_blocks = c["num_hidden_layers"] - c["first_k_dense_replace"]
    routed_per_expert = 3 * c["hidden_size"] * c["moe_intermediate_size"]
    assert active["routed_all"] == moe_blocks * c["n_routed_experts"] * routed_per_expert
    routed = next(r["values"] for r in active["rows"] if r["part"] == "routed experts (top-k share)")
    assert routed == moe_blocks * c["num_experts_per_tok"] * routed_per_expert
    assert active["total"] - active["without_embeddings"] == c["vocab_size"] * c["hidden_size"]


def test_the_fp8_formula_gives_the_bytes_kimi_k2_files_store(collected):
    """The FP8 rule, applied to every matrix the pinned FP8 files store, gives their bytes with scales."""
    got = collected("kimi_k2")
    pairs = weights.stored_pairs(got.layout, "F8_E4M3")
    assert len(pairs) > 60_000
    assert weights.scale_mismatches(got.layout) == []


def test_a_broken_cache_rule_fails_the_build(project_copy, tmp_path):
    """A factor of two slipped into the cache rule: the preview run's cache disagrees, the build stops
    with one line naming the family and the figure, and the site is untouched."""
    path = project_copy / "atlas" / "cost" / "coefficients.py"
    text = path.read_text()
    broken = text.replace("return kv_heads * (key_dim + value_dim)", "return 2 * kv_heads * (key_dim + value_dim)")
    assert broken != text
    path.write_text(broken)
    out = tmp_path / "site"
    out.mkdir()
    (out / "keep.txt").write_text("previous site")
    (out / publish.MARKER).write_text(publish.MARKER_TEXT)  # a site, so the build may replace it
    result = run_build(project_copy, "--family", "gpt2", "--out", str(out))
    assert result.returncode == 1
    lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert lines == [lines[0]] and "gpt2: cost figure KV cache of block 0" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [publish.MARKER, "keep.txt"]


def test_a_broken_flops_rule_fails_the_build(project_copy, tmp_path):
    path = project_copy / "atlas" / "cost" / "coefficients.py"
    text = path.read_text()
    broken = text.replace("return 2 * heads * (key_dim + value_dim)", "return 2 * heads * key_dim")
    assert broken != text
    path.write_text(broken)
    result = run_build(project_copy, "--family", "gpt2", "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert "gpt2: cost figure FLOPs of block 0" in result.stderr and "Traceback" not in result.stderr


def test_bytes_are_written_in_the_binary_unit_they_reach():
    """Worked by hand: under 1 KiB no unit; 2,498,560 / 1024² = 2.3828 MiB; 70,272 / 1024 = 68.625 KiB,
    a half, rounded up (as static/cost.js rounds it); 5 × 1024³ = 5.00 GiB."""
    from atlas.numbers import binary_size

    assert binary_size(1023) == ""
    assert binary_size(1024) == "1.00 KiB"
    assert binary_size(2_498_560) == "2.38 MiB"
    assert binary_size(70_272) == "68.63 KiB"
    assert binary_size(5 * 1024 ** 3) == "5.00 GiB"


# --- the model's FLOPs, beside transformers' eager execution -------------------------------------------


def test_kimi_k2_model_flops_by_hand(kimi):
    """2 × the matrices a token meets (8 of the 384 routed experts, the shared one) + attention over 4,096
    keys, heads expanded (kv_b_proj once, on the new token's latent) and with weight absorption."""
    c = released_config("kimi_k2")
    width, heads, layers, context = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"], 4096
    rank, rope, nope, v = c["kv_lora_rank"], c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["v_head_dim"]
    attention = (width * c["q_lora_rank"] + c["q_lora_rank"] * heads * (nope + rope) + width * (rank + rope)
                 + rank * heads * (nope + v) + heads * v * width)
    dense_mlp = 3 * width * c["intermediate_size"]
    expert = 3 * width * c["moe_intermediate_size"]
    moe = (c["num_experts_per_tok"] + c["n_shared_experts"]) * expert + width * c["n_routed_experts"]  # + the router
    dense, sparse = c["first_k_dense_replace"], layers - c["first_k_dense_replace"]
    matrices = dense * (attention + dense_mlp) + sparse * (attention + moe)
    head = 2 * c["vocab_size"] * width
    expanded = 2 * matrices + head + layers * 2 * heads * (nope + rope + v) * context
    absorbed = 2 * matrices + head + layers * (2 * heads * (rank + rope) + 2 * heads * rank) * context
    # transformers' eager code expands every cached latent again at every step
    eager = expanded + layers * 2 * rank * heads * (nope + v) * (context - 1)
    fig = bf16(kimi, context)
    assert fig["model_flops"] == expanded
    assert fig["absorbed_flops"] == absorbed
    assert fig["flops"] == eager
    assert 0.05e12 < expanded < 0.2e12 and 0.05e12 < absorbed < 0.2e12
    assert eager > 4e12  # the figure the page used to lead with
    summary = kimi["cost"]["summary"]
    assert (summary["flops_per_token"], summary["flops_per_token_absorbed"], summary["flops_per_token_eager"]) == (expanded, absorbed, eager)


def test_llama4_scout_model_flops_by_hand(collected):
    """The top-1 of 16 routed experts and the shared expert, not every expert as transformers' dense
    dispatch multiplies them; chunked blocks see only the keys of their own chunk."""
    c = released_config("llama4")
    facts = collected("llama4").facts
    width, heads, kv, head_dim = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    attention = width * heads * head_dim + 2 * width * kv * head_dim + heads * head_dim * width
    expert = 3 * width * c["intermediate_size"]
    router = width * c["num_local_experts"]
    layers = c["num_hidden_layers"]
    per_key = 2 * heads * 2 * head_dim
    head = 2 * c["vocab_size"] * width
    chunked = sum(c["no_rope_layers"])  # the rotary blocks attend within chunks, the others to every key
    fixed = 2 * (attention + (c["num_experts_per_tok"] + 1) * expert + router)
    for context in (4096, 8192 + 100):
        in_chunk = (context - 1) % c["attention_chunk_size"] + 1
        model = head + layers * fixed + chunked * per_key * in_chunk + (layers - chunked) * per_key * context
        assert bf16(facts, context)["model_flops"] == model
    model = bf16(facts, 4096)["model_flops"]
    assert 25e9 < model < 80e9
    every_expert = 2 * (attention + (c["num_local_experts"] + 1) * expert + router)
    assert bf16(facts, 4096)["flops"] == head + layers * (every_expert + per_key * 4096)
    assert "absorbed_flops" not in bf16(facts, 4096)


@pytest.mark.parametrize("name", ["llama4", "deepseek_v32", "deepseek_v4", "longcat_flash"])
def test_the_model_figure_equals_the_hooks_on_the_preview_run(collected, name):
    """Each block's model figure at the tiny sizes equals the flop counter's count with hooks charging
    experts only for routed tokens, kv_b_proj for the new latent and attention for the keys seen; and
    where the model and transformers' code differ at the tiny sizes, the hooks did charge something apart."""
    checks = [c for c in collected(name).facts["cost"]["checks"] if c["figure"].startswith("model FLOPs")]
    assert checks and all(c["formula"] == c["measured"] for c in checks), checks
    assert any("→" in c["how"] or "weights not zero" in c["how"] for c in checks), checks


def test_longcat_active_parameters_are_a_range_beside_the_vendors(collected):
    c = released_config("longcat_flash")
    active = collected("longcat_flash").facts["cost"]["active"]
    routed = next(r["values"] for r in active["rows"] if r["part"] == "routed experts (top-k share)")
    # every routing slot on a zero-computation expert: no routed expert's three matrices at all
    assert routed == c["num_layers"] * c["moe_topk"] * 3 * c["hidden_size"] * c["expert_ffn_hidden_size"]
    assert active["fewest"] == active["total"] - routed
    assert active["fewest_without_embeddings"] == active["fewest"] - c["vocab_size"] * c["hidden_size"]
    published = active["published"]
    assert (published["fewest"], published["most"]) == (18_600_000_000, 31_300_000_000)
    assert published["source"].startswith("https://huggingface.co/meituan-longcat/")
    # the atlas's own range, embeddings left out, lands on the vendor's to within 1 %
    assert abs(active["fewest_without_embeddings"] - published["fewest"]) < 0.01 * published["fewest"]
    assert abs(active["without_embeddings"] - published["most"]) < 0.01 * published["most"]


def test_flops_are_written_in_the_decimal_unit_they_reach():
    from atlas.numbers import flops_scaled

    assert flops_scaled(999) == "999 FLOPs"
    assert flops_scaled(73_617_920_000) == "73.62 GFLOPs"
    assert flops_scaled(999_995) == "1.00 MFLOPs"  # rounding up into the next unit
    assert flops_scaled(4_264_470_904_832) == "4.26 TFLOPs"


# --- the cost section in Chromium ---------------------------------------------------------------------

HOVERED = ("kimi_k2", "llama4", "longcat_flash", "deepseek_v4", "jamba", "gpt2")  # latent, chunked + dense dispatch,
# zero experts, compressed, fixed state beside attention, plain


@pytest.fixture(scope="module")
def cost_site(tmp_path_factory):
    from tests.conftest import build_families

    return build_families(tmp_path_factory, *HOVERED)


def _card_after(page, figure, how):
    if how == "hover":
        figure.hover()
    else:
        figure.focus()
    return page.text_content("#cost-card")


@pytest.mark.skipif(not __import__("pathlib").Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")
@pytest.mark.parametrize("name", HOVERED)
def test_no_figure_of_the_cost_section_shows_undefined(browser, cost_site, name):
    """Every figure of the cost section, hovered and focused at the smallest and the largest context,
    with a batch typed past each bound and each cache dtype: its card and the section never say
    undefined or NaN, every figure has a formula, and the page's numbers are the build's."""
    from atlas.numbers import flops_scaled
    from tests.conftest import served

    facts = __import__("json").loads((cost_site / name / "facts.json").read_text())
    with served(cost_site) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base + f"{name}/index.html")
        stops = [int(s) for s in page.get_attribute("#cost-context", "data-stops").split(",")]
        for index, batch, dtype, shown_batch in ((0, "0", "FP8", 1), (len(stops) - 1, "99999", "BF16", 4096), (len(stops) // 2, "-3", "BF16", 1)):
            page.eval_on_selector("#cost-context", f"(e) => {{ e.value = {index}; e.dispatchEvent(new Event('input')); }}")
            page.fill("#cost-batch", batch)
            page.dispatch_event("#cost-batch", "input")
            page.select_option("#cost-dtype", dtype)
            assert page.input_value("#cost-batch") == str(shown_batch)  # clamped to the field's bounds
            figures = page.locator("#cost .figure")
            assert figures.count() >= 8
            for i in range(figures.count()):
                figure = figures.nth(i)
                assert figure.get_attribute("title"), figure.inner_text()
                for how in ("hover", "focus"):
                    card = _card_after(page, figure, how)
                    assert card and "undefined" not in card and "NaN" not in card, (how, figure.inner_text(), card)
            text = page.text_content("#cost")
            assert "undefined" not in text and "NaN" not in text
            want = cost.figures(facts["cost"], stops[index], shown_batch, dtype)
            assert page.text_content("[data-figure=model_flops]") == f"{want['model_flops']:,}"
            assert page.text_content("[data-scaled=model_flops]") == f"({flops_scaled(want['model_flops'])})"
            assert page.text_content("[data-figure=flops]") == f"{want['flops']:,}"
            assert page.text_content("[data-figure=cache]").startswith(f"{want['cache']:,} bytes")
            if "absorbed_flops" in want:
                assert page.text_content("[data-figure=absorbed_flops]") == f"{want['absorbed_flops']:,}"
            if "per_position_here" in want:
                assert page.text_content("[data-figure=per_position_here]").startswith(f"{want['per_position_here']:,} bytes")
        page.fill("#cost-batch", "")
        page.dispatch_event("#cost-batch", "change")  # an emptied field, left: it shows the batch the figures use
        assert page.input_value("#cost-batch") == "1"
        assert not errors, errors
        page.close()


def test_a_broken_model_flops_rule_fails_the_build(project_copy, tmp_path):
    """Attention per key left out of the model's figure: the hooks' count on the preview run disagrees."""
    path = project_copy / "atlas" / "cost" / "model_figure.py"
    text = path.read_text()
    broken = text.replace("attend = n_att * attention_flops_per_key(heads, qk, v)", "attend = n_att * attention_flops_per_key(heads, qk, 0)")
    assert broken != text
    path.write_text(broken)
    result = run_build(project_copy, "--family", "gpt2", "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert "gpt2: cost figure model FLOPs of block 0" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("published, field", [
    ({"fewest": 31, "most": 18, "source": "https://example.org", "says": "x"}, "published_active"),
    ({"fewest": 1.5, "most": 18, "source": "https://example.org", "says": "x"}, "published_active"),
    ({"fewest": 1, "most": 18, "source": "the model card", "says": "x"}, "published_active.source"),
    ({"fewest": 1, "most": 18, "source": "https://example.org", "says": " "}, "published_active.says"),
])
def test_a_vendor_range_that_cannot_be_shown_is_the_family_module_s_error(published, field):
    from atlas.errors import AtlasError
    from atlas.inputs.preflight import _check_published_active

    with pytest.raises(AtlasError) as error:
        _check_published_active("atlas/families/x.py", published)
    assert str(error.value).startswith(f"atlas/families/x.py: {field}:"), str(error.value)
