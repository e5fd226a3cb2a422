"""Compare pages: the static page of Kimi K2 and DeepSeek-V3 against their two config.json files, and
in Chromium the picker, the page that assembles any pair, and the cost section's context slider."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from atlas.cost import figures as cost
from atlas.numbers import binary_size
from tests.conftest import CHROMIUM, build_families, released_config, served


@pytest.fixture(scope="module")
def pair_site(tmp_path_factory) -> Path:
    return build_families(tmp_path_factory, "kimi_k2", "deepseek_v3")


def differing_rows(page: str) -> dict[str, tuple[str, str]]:
    """The config table's rows marked as differing: key -> (first, second) as shown."""
    section = page.split('id="config-diff"')[1].split("</section>")[0].split("<details>")[0]
    rows = {}
    for row in re.findall(r'<tr class="differs" data-key="([^"]+)">(.*?)</tr>', section, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", row[1], re.S)]
        rows[html.unescape(row[0])] = (cells[1], cells[2])
    return rows


def test_kimi_k2_and_deepseek_v3_list_every_differing_config_value(pair_site):
    page = (pair_site / "compare" / "kimi_k2--deepseek_v3.html").read_text()
    kimi, deepseek = released_config("kimi_k2"), released_config("deepseek_v3")
    expected = {k for k in set(kimi) | set(deepseek) if kimi.get(k) != deepseek.get(k)}
    shown = differing_rows(page)
    assert set(shown) == expected
    for key in ("n_routed_experts", "num_attention_heads", "first_k_dense_replace", "routed_scaling_factor", "n_group", "topk_group"):
        assert shown[key] == (str(kimi[key]), str(deepseek[key]))
    assert "both are built as DeepseekV3ForCausalLM" in page


def test_the_pair_page_shows_patterns_parameters_and_the_routing_step(pair_site):
    page = (pair_site / "compare" / "kimi_k2--deepseek_v3.html").read_text()
    kimi, deepseek = released_config("kimi_k2"), released_config("deepseek_v3")
    for c in (kimi, deepseek):  # the block patterns: dense blocks first, then the mixture
        assert f"dense block × {c['first_k_dense_replace']}" in page
        assert f"MoE block × {c['num_hidden_layers'] - c['first_k_dense_replace']}" in page
    attention = page.split("<h3>MoE block</h3>")[1].split("</table>")[0]
    assert 'class="differs" data-key="self_attn"' in attention  # 64 heads against 128
    gate = page.split('data-component="MoE_block.mlp.gate"')[1].split('class="eq-diff"')[0]
    assert "groups" in gate and f"{deepseek['topk_group']} of {deepseek['n_group']}" in gate
    assert "Steps only deepseek_v3 takes" in gate


def test_the_index_and_family_pages_reach_the_picker(pair_site):
    assert 'class="compare-picker family-picker"' in (pair_site / "index.html").read_text()
    family = (pair_site / "kimi_k2" / "index.html").read_text()
    assert 'data-family="kimi_k2"' in family and 'href="../compare/index.html#kimi_k2"' in family
    families = (pair_site / "compare" / "families.js").read_text()
    data = json.loads(families.split("=", 1)[1].strip().rstrip(";"))
    assert data["pairs"] == [["kimi_k2", "deepseek_v3"]]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_picker_compare_page_and_context_slider_in_chromium(pair_site):
    from playwright.sync_api import sync_playwright

    facts = json.loads((pair_site / "kimi_k2" / "facts.json").read_text())
    with served(pair_site) as base:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(base + "kimi_k2/index.html")
            # the slider: every figure follows the context picked; the numbers come from atlas.cost.figures.figures
            stops = [int(s) for s in page.get_attribute("#cost-context", "data-stops").split(",")]
            index = stops.index(1024)
            page.eval_on_selector("#cost-context", f"(e) => {{ e.value = {index}; e.dispatchEvent(new Event('input')); }}")
            page.fill("#cost-batch", "4")
            page.dispatch_event("#cost-batch", "input")
            want = cost.figures(facts["cost"], 1024, 4, "BF16")
            assert page.text_content("#cost-context-value") == "1,024 tokens"
            assert page.text_content("[data-figure=cache]").startswith(f"{want['cache']:,} bytes")
            assert page.text_content("[data-figure=flops]") == f"{want['flops']:,}"
            # a batch past the field's bounds is clamped to them, in the field and in every figure
            page.fill("#cost-batch", "99999")
            page.dispatch_event("#cost-batch", "input")
            top = cost.figures(facts["cost"], 1024, 4096, "BF16")
            assert page.input_value("#cost-batch") == "4096"
            assert page.text_content("[data-figure=cache]") == f"{top['cache']:,} bytes ({binary_size(top['cache'])})"
            # bytes in the binary unit they reach (Kimi K2's 70,272 bytes a position: 68.63 KiB, not 0.00 GiB)
            assert page.text_content("[data-figure=per_token]") == f"{want['per_token']:,} bytes ({binary_size(want['per_token'])})"
            assert binary_size(70_272) == "68.63 KiB"  # 68.625: a half, rounded up on both sides
            assert binary_size(want["cache"]).endswith(("MiB", "GiB"))
            # after every change, no figure's formula says undefined (the expanded heads' one did)
            page.select_option("#cost-dtype", "FP8")
            titles = page.eval_on_selector_all("[data-figure]", "es => es.map(e => e.getAttribute('title'))")
            assert titles and all(t and "undefined" not in t for t in titles), titles
            expanded = cost.figures(facts["cost"], 1024, 4096, "FP8")["expanded_per_token_formula"]
            assert page.get_attribute("[data-figure=expanded_per_token]", "title") == expanded
            page.select_option("#cost-dtype", "BF16")
            page.fill("#cost-batch", "4")
            page.dispatch_event("#cost-batch", "input")
            # hovering a number shows its formula and its check
            page.hover("[data-figure=per_token]")
            assert "576" in page.text_content("#cost-card") and "Checked" in page.text_content("#cost-card")
            # the picker leads to the pair's own page
            page.select_option("form.family-picker .pick-b", "deepseek_v3")
            href = page.get_attribute("form.family-picker .pick-go", "href")
            assert href.endswith("compare/kimi_k2--deepseek_v3.html")
            # the page that assembles any pair draws the same differing keys as the static page
            page.goto(base + "compare/index.html#deepseek_v3--kimi_k2")
            page.wait_for_selector("#config-diff tr.differs")
            keys = page.eval_on_selector_all("#config-diff tr.differs", "rows => rows.map(r => r.dataset.key)")
            static = differing_rows((pair_site / "compare" / "kimi_k2--deepseek_v3.html").read_text())
            assert set(keys) == set(static)
            assert not errors, errors
            browser.close()
