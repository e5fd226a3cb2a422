"""The generated site in real Chromium (Debian's), driven by Playwright, served on 127.0.0.1.

Each test asserts on what a reader sees and does. Screenshots of the family page and one component
page, at 1280 px and 360 px, light and dark, go to test-artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas import families
from tests.conftest import CHROMIUM, ROOT, released_config, served

playwright = pytest.importorskip("playwright.sync_api")

ARTIFACTS = ROOT / "test-artifacts"
FAMILY = "kimi_k2/index.html"
COMPONENT = "kimi_k2/c/MoE_block.self_attn.html"
KIMI = released_config("kimi_k2")  # the sizes the pages must show
LAST = KIMI["num_hidden_layers"] - 1

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make test installs it)")


@pytest.fixture(scope="module")
def base(built_site):
    with served(built_site) as url:
        yield url


class Watched:
    """A page that records console errors, page errors and every request it makes."""

    def __init__(self, browser, width=1280, scheme="light"):
        self.page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
        self.errors, self.requests = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.page.close()


def card_name(page):
    return page.locator("#part-card .card-name code").inner_text()


def visible_svg(page):
    return page.locator("svg.block-svg:not([hidden])")


def test_hover_shows_the_standard_name_and_its_card(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + FAMILY)
        page.hover("svg.block-svg:not([hidden]) .part[aria-label^='input_layernorm']")
        assert card_name(page) == "attention_norm_output"
        card = page.locator("#part-card").inner_text()
        assert "Residual" in card and f"{KIMI['hidden_size']:,}" in card and "model.layers.0.input_layernorm" in card
        page.hover("svg.block-svg:not([hidden]) .part[aria-label^='self_attn']")
        assert card_name(page) == "attention_output"
        page.hover(".flow .part >> text=embed_tokens")
        assert card_name(page) == "token_embeddings"
        assert not w.errors


def test_click_pins_the_card(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + FAMILY)
        page.click("svg.block-svg:not([hidden]) .part[aria-label^='post_attention_layernorm']")
        assert card_name(page) == "mlp_norm_output"
        assert "pinned" in page.locator("#part-card").inner_text()
        page.hover("svg.block-svg:not([hidden]) .part[aria-label^='self_attn']")
        assert card_name(page) == "mlp_norm_output"  # still pinned
        page.keyboard.press("Escape")
        page.hover("svg.block-svg:not([hidden]) .part[aria-label^='input_layernorm']")
        assert card_name(page) == "attention_norm_output"


def test_the_slider_redraws_block_0_dense_block_1_mixture(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + FAMILY)
        assert page.locator("#block-index").inner_text() == "0"
        svg = visible_svg(page)
        assert svg.count() == 1
        assert svg.locator(".part[data-module='gate']").count() == 0
        assert f"{KIMI['intermediate_size']:,}" in svg.text_content()  # the dense MLP's width, config.json's intermediate_size
        page.focus("#block-slider")
        page.keyboard.press("ArrowRight")
        assert page.locator("#block-index").inner_text() == "1"
        svg = visible_svg(page)
        assert svg.locator(".part[data-module='gate']").count() == 1
        assert f"top-{KIMI['num_experts_per_tok']} of {KIMI['n_routed_experts']}" in svg.text_content()
        assert page.locator("#block-kind").inner_text() == "MoE block"
        page.keyboard.press("End")
        assert page.locator("#block-index").inner_text() == str(LAST)
        # a pinned card follows the block picked
        page.click("svg.block-svg:not([hidden]) .part[aria-label^='gate']")
        assert f"model.layers.{LAST}." in page.locator("#part-card").inner_text()  # the card names the module in the last block
        page.focus("#block-slider")
        page.keyboard.press("Home")
        assert visible_svg(page).locator(".part[data-module='gate']").count() == 0
        assert not w.errors


def test_deep_link_to_a_block(browser, base):
    with Watched(browser) as w:
        w.page.goto(base + FAMILY + "#block-7")
        assert w.page.locator("#block-index").inner_text() == "7"
        assert visible_svg(w.page).locator(".part[data-part='routed_output']").count() == 1


def test_keyboard_reaches_and_pins_a_part(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + FAMILY)
        page.focus("#block-slider")
        for _ in range(12):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('part')"):
                break
        assert page.evaluate("document.activeElement.closest('svg') !== null")
        page.keyboard.press("Enter")
        assert "pinned" in page.locator("#part-card").inner_text()


def test_katex_rendered_with_its_fonts_and_all_steps_open(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + COMPONENT)
        page.evaluate("document.fonts.ready")
        assert page.locator(".eq-summary .katex").count() >= 2
        assert page.evaluate("document.fonts.check('16px KaTeX_Main') && document.fonts.check('16px KaTeX_Math')")
        loaded = page.evaluate("[...document.fonts].filter(f => f.family.startsWith('KaTeX') && f.status === 'loaded').length")
        assert loaded >= 2
        assert any(u.endswith(".woff2") for u in w.requests)
        assert not any(u.endswith((".woff", ".ttf")) for u in w.requests)  # the fallbacks are served, never loaded
        # the query stream is colored, and differently from the key stream
        q = page.locator(".eq-summary .st-q").first.evaluate("e => getComputedStyle(e).color")
        k = page.locator(".eq-summary .st-k").first.evaluate("e => getComputedStyle(e).color")
        assert q != k
        steps = page.locator("#eq-steps")
        assert not steps.locator("li").first.is_visible()
        page.click("#eq-steps summary")
        assert steps.locator("li").first.is_visible()
        assert steps.locator("li:not(.eq-head)").count() == int(page.locator("#eq-steps summary").inner_text().split()[1])
        assert not w.errors


def test_breadcrumbs_reach_the_component_pages(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + "kimi_k2/c/MoE_block.self_attn.kv_b_proj.weight.html")
        page.click("nav.crumbs >> text=60 MoE blocks")
        page.wait_for_url("**/kimi_k2/c/MoE_block.html")
        assert page.locator("h1").inner_text() == "MoE block"
        page.click("#inside >> text=Latent attention")
        page.wait_for_url("**/" + COMPONENT)
        page.click("nav.crumbs >> text=Kimi K2")
        page.wait_for_url("**/" + FAMILY)
        assert not w.errors


def test_links_resolve_no_console_errors_no_requests_off_origin(browser, base):
    visited = ["index.html", FAMILY, COMPONENT, "kimi_k2/c/model.html", "kimi_k2/c/MoE_block.mlp.gate.e_score_correction_bias.html",
               "kimi_k2/c/value.attention_output.html", "deepseek_v3/index.html"]
    with Watched(browser) as w:
        page = w.page
        for path in visited:
            response = page.goto(base + path)
            assert response.status == 200, path
            page.evaluate("document.fonts.ready")
            hrefs = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
            for href in sorted(set(h.split("#")[0] for h in hrefs)):
                assert href.startswith(base), href
                assert page.request.get(href).status == 200, (path, href)
        assert not w.errors, w.errors
        assert w.requests and all(u.startswith(base) or u.startswith("data:") for u in w.requests), [u for u in w.requests if not u.startswith(base)]


@pytest.mark.parametrize("path", ["index.html", FAMILY, COMPONENT, "kimi_k2/c/MoE_block.html"])
def test_readable_at_360_px_without_horizontal_scroll(browser, base, path):
    with Watched(browser, width=360) as w:
        w.page.goto(base + path)
        w.page.evaluate("document.fonts.ready")
        if path == COMPONENT:
            w.page.click("#eq-steps summary")
        sizes = w.page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth, document.body.scrollWidth]")
        assert sizes[0] <= sizes[1] and sizes[2] <= sizes[1], sizes


def test_theme_toggle_and_system_preference(browser, base):
    with Watched(browser, scheme="dark") as w:
        page = w.page
        page.goto(base + FAMILY)
        dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        page.click("#theme-toggle")
        assert page.evaluate("document.documentElement.dataset.theme") == "light"
        light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert dark_bg != light_bg
        page.goto(base + COMPONENT)  # the choice is remembered across pages
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == light_bg
        page.click("#theme-toggle")  # back to the system's dark: the page follows the system again
        assert page.evaluate("document.documentElement.dataset.theme") is None
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == dark_bg
        assert page.evaluate("localStorage.getItem('atlas-theme')") is None


def test_index_search_filters_families_and_standard_names(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + "index.html")
        cards = page.locator(".family-card")
        assert cards.count() >= 2
        assert page.locator(".family-card .stack.mini li").count() > 0
        page.fill("#search", "moonshot")
        moonshot = sorted(families.load(n).title for n in families.names() if "moonshot" in families.load(n).vendor.lower())
        assert "Kimi K2" in moonshot  # the vendor's families, and only they, stay visible
        assert sorted(page.locator(".family-card:visible h2").all_inner_texts()) == moonshot
        page.fill("#search", "expert_weights")
        assert page.locator(".family-card[data-family='gpt2']").is_hidden()  # GPT-2 routes no token to an expert
        names = page.locator(".family-card:visible .names a")
        assert names.count() >= 1
        names.first.click()
        page.wait_for_url("**/c/value.expert_weights.html")
        assert page.locator("h1").inner_text() == "expert_weights"
        page.go_back()
        page.fill("#search", "no-such-architecture")
        assert page.locator(".family-card:visible").count() == 0
        assert not w.errors


def test_index_search_finds_families_by_derived_abbreviations(browser, base, built_site):
    import json

    derived = {p.parent.name: {f["abbreviation"].lower() for f in json.loads(p.read_text(encoding="utf-8"))["features"]}
               for p in built_site.glob("*/facts.json")}
    with Watched(browser) as w:
        page = w.page
        page.goto(base + "index.html")
        for query in ("gqa", "mla", "mxfp4", "swa"):
            page.fill("#search", query)
            shown = set(page.locator(".family-card:visible").evaluate_all("cards => cards.map(c => c.dataset.family)"))
            assert shown == {name for name, found in derived.items() if query in found}, query
        page.fill("#search", "gqa")
        shown = set(page.locator(".family-card:visible").evaluate_all("cards => cards.map(c => c.dataset.family)"))
        assert "llama" in shown and "gpt2" not in shown
        assert not w.errors


def test_works_from_file_urls(browser, built_site):
    with Watched(browser) as w:
        page = w.page
        page.goto((built_site / FAMILY).as_uri())
        page.focus("#block-slider")
        page.keyboard.press("ArrowRight")
        assert visible_svg(page).locator(".part[data-module='gate']").count() == 1
        page.goto((built_site / COMPONENT).as_uri())
        page.evaluate("document.fonts.ready")
        assert page.evaluate("document.fonts.check('16px KaTeX_Main')")
        assert not w.errors, w.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 360])
def test_screenshots(browser, base, width, scheme):
    ARTIFACTS.mkdir(exist_ok=True)
    with Watched(browser, width=width, scheme=scheme) as w:
        page = w.page
        page.goto(base + FAMILY + "#block-3")
        page.click("svg.block-svg:not([hidden]) .part[aria-label^='gate']")
        page.locator("#block").screenshot(path=str(ARTIFACTS / f"family-block-{width}-{scheme}.png"))
        page.screenshot(path=str(ARTIFACTS / f"family-{width}-{scheme}.png"), full_page=True)
        page.goto(base + COMPONENT)
        page.evaluate("document.fonts.ready")
        page.click("#eq-steps summary")
        page.screenshot(path=str(ARTIFACTS / f"component-{width}-{scheme}.png"), full_page=True)
        assert not w.errors
    assert (ARTIFACTS / f"component-{width}-{scheme}.png").stat().st_size > 10_000


def pages_with_previews(site: Path) -> list[str]:
    return sorted(p.name for p in (site / "kimi_k2/c").glob("value.*.html") if 'id="preview-data"' in p.read_text(encoding="utf-8"))


def test_previews_are_drawn(browser, base, built_site):
    drawn = pages_with_previews(built_site)
    assert {"value.attention_probabilities.html", "value.layer_output.html", "value.expert_weights.html"} <= set(drawn)
    with Watched(browser) as w:
        page = w.page
        page.goto(base + "kimi_k2/c/value.attention_probabilities.html")
        canvas = page.locator("#previews canvas").first
        assert canvas.is_visible()
        before = canvas.evaluate("c => c.toDataURL()")
        page.click("#previews [aria-label=head] button >> nth=1")
        assert page.locator("#previews [aria-label=head] button >> nth=1").get_attribute("aria-pressed") == "true"
        assert page.locator("#previews canvas").first.evaluate("c => c.toDataURL()") != before  # another head, another pattern
        page.locator("#previews canvas").first.scroll_into_view_if_needed()
        box = page.locator("#previews canvas").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] * 0.9)
        assert "query" in page.locator("#previews .readout").first.inner_text()
        assert "random" in page.locator("#preview").inner_text()  # the page says what the run was
        page.goto(base + "kimi_k2/c/value.layer_output.html")
        assert page.locator("#previews .grid-figure canvas").count() >= 1
        assert page.locator("#previews .hist canvas").count() >= 1
        page.goto(base + "kimi_k2/c/value.expert_weights.html")
        assert page.locator("#previews canvas").count() >= 1
        assert "chosen experts" in page.locator("#previews").inner_text()
        assert not w.errors, w.errors


def test_the_drawing_names_the_block_picked(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + FAMILY + "#block-42")
        assert "layers[42] input" in visible_svg(page).text_content()
        page.focus("#block-slider")
        page.keyboard.press("ArrowLeft")
        assert "layers[41] input" in visible_svg(page).text_content()


def test_index_to_family_page_shows_the_checked_total(browser, base):
    with Watched(browser) as w:
        page = w.page
        page.goto(base + "index.html")
        page.get_by_role("link", name="Kimi K2").first.click()
        page.wait_for_url("**/kimi_k2/index.html")
        assert page.get_by_role("heading", level=1).inner_text() == "Kimi K2"
        # 2 × 163,840 × 7,168 + 7,168 + 497,500,160 + 60 × 17,059,365,248, written out by the page.
        assert "1,026,408,232,448" in page.inner_text("body")
        assert not w.errors and all(url.startswith(base) for url in w.requests)
