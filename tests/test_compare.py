"""Compare pages: the static page of Kimi K2 and DeepSeek-V3 against their two config.json files, GPT-2
beside Llama (keys and modules named otherwise, aligned), relatives ranked by shared architecture, and
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
    return build_families(tmp_path_factory, "kimi_k2", "deepseek_v3", "gpt2", "llama")


def differing_rows(page: str) -> dict[str, tuple[str, str]]:
    """The config table's rows marked as differing: key -> (first, second) as shown."""
    section = page.split('id="config-diff"')[1].split("</section>")[0].split("<details>")[0]
    rows = {}
    for row in re.findall(r'<tr class="differs" data-key="([^"]+)">(.*?)</tr>', section, re.S):
        cells = [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in re.findall(r"<td>(.*?)</td>", row[1], re.S)]
        rows[html.unescape(row[0])] = (cells[1], cells[2])
    return rows


def test_kimi_k2_and_deepseek_v3_list_every_differing_config_value(pair_site):
    page = (pair_site / "compare" / "kimi_k2--deepseek_v3.html").read_text()
    kimi, deepseek = released_config("kimi_k2"), released_config("deepseek_v3")
    # a key the configuration class also answers to under transformers' common name is shown under that
    # name, its own beside the value (n_routed_experts is num_local_experts, as in Mixtral's files)
    from transformers import DeepseekV3Config

    common = {own: name for name, own in DeepseekV3Config.attribute_map.items()}
    expected = {common.get(k, k) for k in set(kimi) | set(deepseek) if kimi.get(k) != deepseek.get(k)}
    shown = differing_rows(page)
    assert set(shown) == expected
    assert shown["num_local_experts"] == (f"{kimi['n_routed_experts']} as n_routed_experts", f"{deepseek['n_routed_experts']} as n_routed_experts")
    for key in ("num_attention_heads", "first_k_dense_replace", "routed_scaling_factor", "n_group", "topk_group"):
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
    assert ["kimi_k2", "deepseek_v3"] in data["pairs"]


def script_data(site: Path, name: str) -> dict:
    return json.loads((site / "compare" / name).read_text().split("=", 1)[1].strip().rstrip(";"))


def test_relatives_are_ranked_by_shared_architecture_with_the_traits_named(pair_site):
    relatives = script_data(pair_site, "relatives.js")
    # the two latent-attention mixtures are each other's nearest; GPT-2 (learned positions, LayerNorm,
    # a two-layer MLP) is Llama's nearest only among these four, and far less near
    first = relatives["kimi_k2"][0]
    assert first["name"] == "deepseek_v3" and first["score"] == 100
    assert {"multi-head latent attention (MLA)", "a shared expert", "rotary position embedding (RoPE)"} <= set(first["shared"])
    gpt2 = next(r for r in relatives["llama"] if r["name"] == "gpt2")
    assert gpt2["score"] < 50 and "rotary position embedding (RoPE)" not in gpt2["shared"]
    assert all(len(rows) <= 8 for rows in relatives.values())


def cells(page: str, section: str, key: str) -> list[str]:
    """The shown text of a row's two value cells in a section of a static compare page."""
    part = page.split(f'id="{section}"')[1]
    row = re.search(rf'data-key="{re.escape(key)}">(.*?)</tr>', part, re.S).group(1)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in re.findall(r"<td>(.*?)</td>", row, re.S)][1:]


def test_config_and_parameter_rows_are_aligned_by_standard_names(pair_site):
    page = (pair_site / "compare" / "llama--gpt2.html").read_text()
    gpt2, llama = released_config("gpt2"), released_config("llama")
    a, b = ("gpt2", "llama") if page.index("<th>gpt2</th>") < page.index("<th>llama</th>") else ("llama", "gpt2")
    own = {"gpt2": gpt2, "llama": llama}
    # GPT-2's n_layer / n_embd / n_head sit in the rows of Llama's names, their own names beside them
    for common, gpt2_key in (("num_hidden_layers", "n_layer"), ("hidden_size", "n_embd"), ("num_attention_heads", "n_head")):
        shown = dict(zip((a, b), cells(page, "config-diff", common)))
        assert shown["gpt2"] == f"{gpt2[gpt2_key]} as {gpt2_key}" and shown["llama"] == str(llama[common])
        assert f'data-key="{gpt2_key}"' not in page
    # wte and embed_tokens meet in the row of what they produce: vocabulary × width values each
    shown = dict(zip((a, b), cells(page, "parameters", "token_embeddings")))
    assert shown["gpt2"] == f"{gpt2['vocab_size'] * gpt2['n_embd']:,} as transformer.wte"
    assert shown["llama"] == f"{llama['vocab_size'] * llama['hidden_size']:,} as model.embed_tokens"


def test_every_compare_has_cost_rows_and_rendered_steps_with_sizes(pair_site):
    page = (pair_site / "compare" / "kimi_k2--deepseek_v3.html").read_text()
    # both cache one 512-wide latent and one 64-wide rotary key per block, 2 bytes each, in 61 blocks:
    # the same bytes per token, though their heads differ (64 against 128)
    for name in ("kimi_k2", "deepseek_v3"):
        c = released_config(name)
        assert c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2 == 70_272
    assert [s.split(" ")[0] for s in cells(page, "cost-diff", "KV cache per token (BF16)")] == ["70,272", "70,272"]
    for label in ("weights as stored", "KV cache at 4,096 tokens", "FLOPs per token at 4,096 tokens, the model",
                  "FLOPs per token at 4,096 tokens, the model with weight absorption",
                  "FLOPs per token at 4,096 tokens, eager transformers code"):
        assert len(cells(page, "cost-diff", label)) == 2
    # the model's figure leads: about 2 x 32 B active parameters plus attention, far under the eager one
    model = [int(s.split(" ")[0].replace(",", "")) for s in cells(page, "cost-diff", "FLOPs per token at 4,096 tokens, the model")]
    eager = [int(s.split(" ")[0].replace(",", "")) for s in cells(page, "cost-diff", "FLOPs per token at 4,096 tokens, eager transformers code")]
    assert 0.05e12 < model[0] < 0.2e12 and all(m < e for m, e in zip(model, eager))
    # the step only DeepSeek-V3 takes is rendered TeX with its own sizes, never TeX source with "n"
    gate = page.split('data-component="MoE_block.mlp.gate"')[1].split('class="eq-diff"')[0]
    steps = gate.split("Steps only deepseek_v3 takes")[1]
    text = re.sub(r"<[^>]+>", "", steps)
    assert 'class="katex' in steps and "\\" not in text  # no TeX source left on the page
    deepseek = released_config("deepseek_v3")
    assert str(deepseek["topk_group"]) in text and str(deepseek["n_group"]) in text
    assert "\\operatorname" not in steps and "\\to" not in steps


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
            # the comparison comes first: its summary is the view's first section, and the view precedes
            # the relatives, which name the first family's nearest with what they share
            order = page.evaluate("""() => [...document.querySelectorAll('#compare-view > section, #relatives')].map(e => e.id)""")
            assert order[0] == "standardized" and order[-1] == "relatives", order
            assert page.evaluate("document.querySelector('#compare-view').getBoundingClientRect().top < 400")
            first = page.text_content("#relatives-list li")
            assert first.startswith("Kimi K2") and "multi-head latent attention (MLA)" in first
            # steps drawn in the browser are rendered by KaTeX too, not shown as TeX source
            assert page.eval_on_selector_all("#equations-diff ul.steps li", "ls => ls.every(l => l.querySelector('.katex'))")
            assert not errors, errors
            browser.close()



def test_a_component_with_an_earlier_ones_differences_points_to_it(tmp_path_factory):
    """Cohere2 MoE's LayerNorms against gpt-oss's RMSNorms: both kinds of block's norms and the final one
    differ in the same steps (the mean taken away), so the steps are printed once and the repeats point
    to them; before, the page weighed over the 300,000 bytes a page may."""
    site = build_families(tmp_path_factory, "cohere2_moe", "gpt_oss")
    text = (site / "compare" / "cohere2_moe--gpt_oss.html").read_text(encoding="utf-8")
    section = text.split('id="equations-diff"')[1].split("</section>")[0]
    boxes = dict(re.findall(r'id="eq-[^"]+" data-component="([^"]+)">(.*?)(?=<div class="eq-diff"|$)', section, re.S))
    norms = [cid for cid, body in boxes.items() if "(norm)" in body and "<p>Only in" not in body]  # the norms both have
    assert len(norms) >= 3, sorted(boxes)
    first, *repeats = norms
    assert "Steps only cohere2_moe takes" in boxes[first] and "mean" in boxes[first]
    for cid in repeats:
        assert f'The same differences as <a href="#eq-{first}"><code>{first}</code></a>.' in boxes[cid], cid
        assert "Steps only" not in boxes[cid] and 'class="katex' not in boxes[cid]
    assert f'id="eq-{first}"' in section  # the link's target is on the page
    if not Path(CHROMIUM).exists():
        return
    # the page that assembles any pair in the browser folds the same repeats to the same components
    from playwright.sync_api import sync_playwright

    static = [(cid, m.group(1)) for cid, body in boxes.items() if (m := re.search(r'The same differences as <a href="#eq-([^"]+)"', body))]
    with served(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(base + "compare/index.html#cohere2_moe--gpt_oss")
        page.wait_for_selector("#equations-diff .eq-diff")
        drawn = page.eval_on_selector_all(
            "#equations-diff .eq-diff", "bs => bs.filter(b => b.querySelector('p > a')).map(b => [b.dataset.component, b.querySelector('p > a').getAttribute('href').slice(4)])")
        browser.close()
    def groups(pointers):  # the components that print one set of differences, whichever of them prints it
        found = {}
        for cid, first in pointers:
            found.setdefault(first, {first}).add(cid)
        return sorted(map(sorted, found.values()))

    # the browser lists the components in another order (its data has sorted keys), so another may come first
    assert static and groups(drawn) == groups(static)
