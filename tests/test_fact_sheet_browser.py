"""The fact sheet in real Chromium: in the family page's first screen at 1280 x 800 with the top of the
diagram, readable at 360 px, and on every index card with what was checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CHROMIUM, released_config, served

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make test installs it)")

FIRST_SCREEN = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def base(built_site):
    with served(built_site) as url:
        yield url


def box(page, selector):
    return page.locator(selector).first.bounding_box()


# how much of the drawing the first screen must show: DeepSeek-V4's five-line block legend and its taller
# sheet leave it only the drawing's first row
@pytest.mark.parametrize("family, drawn", [("kimi_k2", 120), ("qwen3_next", 120), ("gpt2", 120), ("deepseek_v4", 30)])
def test_the_first_screen_shows_the_fact_sheet_and_the_diagram(browser, base, family, drawn):
    page = browser.new_page(viewport=FIRST_SCREEN)
    try:
        page.goto(base + f"{family}/index.html")
        sheet = box(page, "dl.sheet")
        assert sheet["y"] >= 0 and sheet["y"] + sheet["height"] <= FIRST_SCREEN["height"], sheet
        badge = box(page, "#header p.checked")
        assert badge["y"] + badge["height"] <= FIRST_SCREEN["height"], badge
        drawing = box(page, "svg.block-svg:not([hidden])")
        assert drawing["y"] + drawn <= FIRST_SCREEN["height"], drawing
        # the figures a reader looks for first, each a link to where it is derived
        labels = page.locator("dl.sheet dt").all_inner_texts()
        for label in ("parameters", "layers", "width", "heads", "attention", "positions", "context", "vocabulary",
                      "KV cache per token", "weights", "released"):
            assert label in labels, label
        assert page.locator("dl.sheet dd a").count() >= 10
    finally:
        page.close()


def test_the_sheet_shows_the_config_sizes(browser, base):
    kimi = released_config("kimi_k2")
    page = browser.new_page(viewport=FIRST_SCREEN)
    try:
        page.goto(base + "kimi_k2/index.html")
        text = page.locator("dl.sheet").inner_text()
        for figure in (kimi["hidden_size"], kimi["vocab_size"], kimi["max_position_embeddings"]):
            assert f"{figure:,}" in text, figure
        assert f"{kimi['num_attention_heads']} query heads" in text
        # the heads link to the attention page that proves them, and that page exists
        page.click("dl.sheet dd >> text=query heads")
        page.wait_for_url("**/c/*self_attn.html")
        assert page.locator("h1").count() == 1
    finally:
        page.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_sheet_is_readable_on_a_phone(browser, base, scheme):
    page = browser.new_page(viewport={"width": 360, "height": 800}, color_scheme=scheme)
    try:
        page.goto(base + "deepseek_v4/index.html")
        sheet = page.locator("dl.sheet")
        assert sheet.evaluate("s => s.scrollWidth <= s.clientWidth + 1")  # nothing cut at the right
        assert page.evaluate("document.documentElement.scrollWidth <= 361")
        sizes = sheet.locator("dd").evaluate_all("ds => ds.map(d => parseFloat(getComputedStyle(d).fontSize))")
        assert min(sizes) >= 12, sizes
        cells = sheet.locator("div").evaluate_all("ds => ds.map(d => { const r = d.getBoundingClientRect(); return [r.left, r.right]; })")
        assert all(left >= 0 and right <= 360 for left, right in cells), cells
        assert box(page, "dl.sheet")["y"] < 800  # it starts in the first screen
    finally:
        page.close()


def test_every_card_has_its_sheet_and_says_what_was_checked(browser, base, built_site):
    page = browser.new_page(viewport=FIRST_SCREEN)
    try:
        page.goto(base + "index.html")
        cards = page.locator(".family-card")
        count = cards.count()
        assert count == len(list(built_site.glob("*/facts.json")))
        assert page.locator(".family-card dl.sheet").count() == count
        assert page.locator(".family-card p.checked .check-item").count() == 3 * count
        kimi = page.locator(".family-card[data-family='kimi_k2']")
        assert "header figures checked" in kimi.locator("p.checked").inner_text()
        assert "no header figure pinned" in page.locator(".family-card[data-family='qwen3_next'] p.checked").inner_text()
    finally:
        page.close()
