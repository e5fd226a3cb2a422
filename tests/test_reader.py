"""The reader's experience (issue 12), in real Chromium on a real generated site: a pin that follows
its part across blocks, the address and the block kept in step both ways, focus in the order of the
stream, phones (tap targets, the card brought into view, scroll cues, identifiers that wrap whole),
hover and pin told apart, the mixture drawn in parallel, the printout, the small words, the notes'
setup, and a drawing on every value and weight page. Screenshots of the family, a block, an
attention and a tensor page at 1280 and 360 px, light and dark, go to test-artifacts/.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

from tests.conftest import CHROMIUM, ROOT, build_families, released_config, served

playwright = pytest.importorskip("playwright.sync_api")

ARTIFACTS = ROOT / "test-artifacts"
FAMILY = "kimi_k2/index.html"
KIMI = released_config("kimi_k2")
DENSE = KIMI["first_k_dense_replace"]  # blocks 0 .. DENSE-1 are dense, the rest mixtures (config.json)
LAST = KIMI["num_hidden_layers"] - 1
MOE_PART = "svg.block-svg:not([hidden]) .part[data-module='{}']"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (make test installs it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Kimi K2 (a dense block, then mixtures) and GPT-2 (no revision pinned), built by the real command."""
    return build_families(tmp_path_factory, "kimi_k2", "gpt2")


@pytest.fixture(scope="module")
def base(site):
    with served(site) as url:
        yield url


class Reader:
    """A page that records console and page errors; ``touch`` makes it a phone's (taps, no hover)."""

    def __init__(self, browser, width=1280, scheme="light", touch=False, height=740):
        self.context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                           has_touch=touch, is_mobile=touch)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.context.close()


def card(page) -> str:
    return page.locator("#part-card").inner_text()


def block_index(page) -> int:
    return int(page.locator("#block-index").inner_text())


def pick_block(page, i):
    page.focus("#block-slider")
    page.keyboard.press("Home")
    for _ in range(i):
        page.keyboard.press("ArrowRight")
    assert block_index(page) == i


# --- the pin ------------------------------------------------------------------------------------


def test_a_pin_follows_its_value_says_where_it_is_missing_and_comes_back(browser, base, site):
    facts = json.loads((site / "kimi_k2/facts.json").read_text())
    mixture_blocks = next(v for h in facts["support"]["hosts"] for v in h["values"] if v["name"] == "routed_output")["blocks"]
    assert mixture_blocks == list(range(DENSE, KIMI["num_hidden_layers"]))  # as config.json says
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY + "#block-5")
        page.click(MOE_PART.format("gate"))
        pinned = page.locator(MOE_PART.format("gate")).get_attribute("data-part")
        assert pinned and "pinned" in card(page) and "model.layers.5.mlp.gate" in card(page)
        # to a dense block with the keyboard: the card says plainly that the value is not there
        page.focus("#block-slider")
        page.keyboard.press("Home")
        assert block_index(page) == 0
        text = card(page)
        assert pinned in text and "pinned" in text
        assert "model.layers.0.mlp.gate" not in text  # no module that does not exist
        assert f"Block 0 is a dense block: it has no {pinned}." in text
        assert f"blocks {DENSE}–{LAST}" in text
        assert page.locator(".part.pinned").count() == 0
        # hovering elsewhere does not replace the waiting pin
        page.hover("svg.block-svg:not([hidden]) .part[data-module='self_attn']")
        assert "it has no" in card(page)
        # back on a mixture block, by the tick strip: the pin is restored on that block's router
        page.locator(".ticks").scroll_into_view_if_needed()
        strip = page.locator(".ticks").bounding_box()
        page.mouse.click(strip["x"] + strip["width"] * (9.5 / KIMI["num_hidden_layers"]), strip["y"] + strip["height"] / 2)
        assert block_index(page) == 9
        assert "model.layers.9.mlp.gate" in card(page) and "pinned" in card(page)
        assert page.locator(MOE_PART.format("gate")).get_attribute("class").split().count("pinned") == 1
        # a value every block has follows along into the other kind's drawing
        page.keyboard.press("Escape")
        page.click("svg.block-svg:not([hidden]) .part[data-module='input_layernorm']")
        pick_block(page, 0)
        assert "model.layers.0.input_layernorm" in card(page)
        assert page.locator("svg.block-svg:not([hidden]) .part.pinned").get_attribute("data-module") == "input_layernorm"
        assert not r.errors, r.errors


def test_hover_and_pin_look_different_and_only_the_pin_stays_lit(browser, base):
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY + "#block-3")
        page.click("svg.block-svg:not([hidden]) .part[data-module='input_layernorm']")
        page.hover("svg.block-svg:not([hidden]) .part[data-module='self_attn']")
        look = "g => { const s = getComputedStyle(g.querySelector('rect:not(.hit)')); return [s.stroke, s.strokeDasharray, s.strokeWidth, s.fill]; }"
        pinned = page.locator("svg.block-svg:not([hidden]) .part[data-module='input_layernorm']").evaluate(look)
        hovered = page.locator("svg.block-svg:not([hidden]) .part[data-module='self_attn']").evaluate(look)
        resting = page.locator("svg.block-svg:not([hidden]) .part[data-module='post_attention_layernorm']").evaluate(look)
        assert pinned[0] != hovered[0] and pinned[1] != hovered[1]  # another color, solid against dashed
        assert pinned[3] != hovered[3] and resting not in (pinned, hovered)
        page.mouse.move(0, 0)
        page.focus("#block-slider")
        page.keyboard.press("ArrowRight")
        lit = page.locator("svg.block-svg:not([hidden]) .part").evaluate_all(
            "gs => gs.filter(g => { const r = g.querySelector('rect:not(.hit), circle:not(.hit)'); return getComputedStyle(r).fill !== getComputedStyle(document.querySelector('svg.block-svg:not([hidden]) .part.box.norm:not(.pinned) rect')).fill && !g.classList.contains('moe'); }).map(g => g.dataset.module)")
        assert lit == ["input_layernorm"]
        assert not r.errors


# --- the address and the focus order -----------------------------------------------------------


def test_the_address_names_the_block_and_the_block_follows_the_address(browser, base):
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY)
        page.locator(".ticks").scroll_into_view_if_needed()
        strip = page.locator(".ticks").bounding_box()
        page.mouse.click(strip["x"] + strip["width"] * (12.5 / KIMI["num_hidden_layers"]), strip["y"] + strip["height"] / 2)
        assert block_index(page) == 12
        assert page.evaluate("location.hash") == "#block-12"
        page.focus("#block-slider")
        page.keyboard.press("ArrowRight")
        assert page.evaluate("location.hash") == f"#block-{block_index(page)}"
        page.click("button.step[data-step='1']")
        assert page.evaluate("location.hash") == f"#block-{block_index(page)}"
        # the reader edits the address: the page follows
        page.evaluate("location.hash = '#block-30'")
        page.wait_for_function("document.getElementById('block-index').textContent === '30'")
        assert "layers[30] input" in page.locator("svg.block-svg:not([hidden])").text_content()
        assert page.locator("#block-slider").input_value() == "30"
        page.go_back()  # the previous address: its block again
        page.wait_for_function("document.getElementById('block-index').textContent !== '30'")
        assert page.evaluate("location.hash") == f"#block-{block_index(page)}"
        assert not r.errors


def test_tab_follows_the_stream_input_parts_adds_output(browser, base):
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY + "#block-3")
        page.focus("#block-slider")
        order = []
        for _ in range(40):
            page.keyboard.press("Tab")
            inside = page.evaluate("document.activeElement.closest('svg.block-svg') !== null")
            if not inside:
                if order:
                    break
                continue
            order.append(page.evaluate("document.activeElement.getAttribute('aria-label')"))
        names = [o.split(":")[0] for o in order]
        assert names[0] == "layer_input" and names[-1] == "layer_output", names
        expected = ["input_layernorm", "self_attn", "residual add", "post_attention_layernorm", "mlp", "gate", "experts", "shared_experts", "residual add"]
        assert names[1:-1] == expected, names


# --- phones ---------------------------------------------------------------------------------------


def test_phone_tap_targets_readable_labels_and_the_card_in_view(browser, base):
    with Reader(browser, width=360, touch=True) as r:
        page = r.page
        page.goto(base + FAMILY + "#block-3")
        targets = page.locator("svg.block-svg:not([hidden]) .part, .flow .part, button.step, #block-slider, .ticks").evaluate_all(
            "els => els.map(e => { const b = e.getBoundingClientRect(); return [e.getAttribute('aria-label') || e.className.baseVal || e.className || e.id, b.width, b.height]; })")
        small = [t for t in targets if t[1] < 24 or t[2] < 24]
        assert not small, small
        smallest = page.locator("svg.block-svg:not([hidden]) text.sub").evaluate_all(
            "ts => Math.min(...ts.map(t => parseFloat(getComputedStyle(t).fontSize) * t.ownerSVGElement.getScreenCTM().a))")
        assert smallest >= 10, smallest
        # a tap on a part low in the drawing pins the card and brings it into view
        page.locator(MOE_PART.format("shared_experts")).scroll_into_view_if_needed()
        page.tap(MOE_PART.format("shared_experts"))
        assert "pinned" in card(page)
        page.wait_for_timeout(100)
        box = page.locator("#part-card").bounding_box()
        assert 0 <= box["y"] and box["y"] + min(box["height"], 200) <= 740, box
        assert not r.errors


SCROLL_CHECK = """() => {
  const cut = [], silent = [];
  for (const e of document.querySelectorAll('body *')) {
    const s = getComputedStyle(e);
    if (!['auto', 'scroll'].includes(s.overflowX) || e.scrollWidth <= e.clientWidth + 1 || e.offsetParent === null) continue;
    const cue = e.nextElementSibling && e.nextElementSibling.classList.contains('scroll-cue') && !e.nextElementSibling.hidden;
    if (!e.classList.contains('overflowing') || !cue) silent.push(e.tagName + '.' + e.className);
  }
  for (const t of document.querySelectorAll('table')) {
    if (t.offsetParent === null) continue;
    const right = t.getBoundingClientRect().right;
    let box = t.parentElement;
    while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    const visible = box ? box.getBoundingClientRect().right : document.documentElement.clientWidth;
    if (right > visible + 1 && !(box && box.classList.contains('overflowing'))) cut.push(t.className || t.parentElement.id);
  }
  return {cut, silent};
}"""


@pytest.mark.parametrize("path", [FAMILY, "kimi_k2/c/MoE_block.self_attn.kv_b_proj.weight.html", "kimi_k2/c/MoE_block.html", "gpt2/index.html"])
def test_at_360_px_every_box_that_scrolls_says_so(browser, base, path):
    with Reader(browser, width=360) as r:
        page = r.page
        page.goto(base + path)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_timeout(50)
        page.evaluate("window.dispatchEvent(new Event('resize'))")
        found = page.evaluate(SCROLL_CHECK)
        assert found == {"cut": [], "silent": []}, found
        assert page.locator(".scroll-cue:not([hidden])").count() >= 1  # at 360 px something is wider than the screen
        assert not r.errors


BREAKS = """() => {
  const bad = [];
  for (const code of document.querySelectorAll('code')) {
    // a sha256 is no word: it may wrap anywhere
    if (code.closest('pre, svg, .katex') || code.classList.contains('hash') || code.offsetParent === null || code.getClientRects().length < 2) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let prevTop = null, prevChar = '', node;
    while ((node = walker.nextNode())) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        if (prevTop !== null && rect.top > prevTop + 2 && !/[._\\/\\s,(\\[\\-–·:]/.test(prevChar) && !/\\s/.test(node.data[i]))
          bad.push(code.textContent.slice(0, 80) + ' @ ' + prevChar + '|' + node.data[i]);
        prevTop = rect.top; prevChar = node.data[i];
      }
    }
  }
  return bad;
}"""


@pytest.mark.parametrize("path", [FAMILY, "kimi_k2/c/MoE_block.self_attn.kv_b_proj.weight.html", "kimi_k2/c/value.attention_scores.html", "kimi_k2/c/MoE_block.self_attn.kv_a_proj_with_mqa.html"])
def test_identifiers_wrap_between_words_never_inside_one(browser, base, path):
    with Reader(browser, width=360) as r:
        page = r.page
        page.goto(base + path)
        if path == FAMILY:
            page.click(MOE_PART.format("self_attn"))  # the card names model.layers.0.self_attn...
        assert page.evaluate(BREAKS) == []
        assert not r.errors


# --- the mixture's drawing -------------------------------------------------------------------------


def test_the_mixture_draws_routed_and_shared_experts_side_by_side_and_summed(browser, base):
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY + f"#block-{DENSE}")
        svg = page.locator("svg.block-svg:not([hidden])")

        def rect(module):
            return svg.locator(f".part[data-module='{module}'] > rect").evaluate("r => [r.x.baseVal.value, r.y.baseVal.value, r.width.baseVal.value, r.height.baseVal.value]")

        gate, experts, shared, mlp = rect("gate"), rect("experts"), rect("shared_experts"), rect("mlp")
        assert experts[1] == shared[1] and experts[3] == shared[3]  # one row: they run in parallel
        assert experts[0] + experts[2] <= shared[0]  # side by side, not overlapping
        assert gate[1] + gate[3] < experts[1]  # the router first
        total = svg.locator(".sum circle").evaluate_all("cs => cs.map(c => [c.cx.baseVal.value, c.cy.baseVal.value])")
        assert len(total) == 1
        cx, cy = total[0]
        assert experts[0] < cx < shared[0] + shared[2] and cy > experts[1] + experts[3]  # under both: their sum
        assert mlp[1] < cy < mlp[1] + mlp[3]  # inside the mixture
        # every label inside its box
        for module in ("gate", "experts", "shared_experts"):
            inside = svg.locator(f".part[data-module='{module}']").evaluate(
                "g => { const r = g.querySelector('rect').getBBox(); return [...g.querySelectorAll('text')].every(t => { const b = t.getBBox(); return b.x >= r.x + 2 && b.x + b.width <= r.x + r.width - 2; }); }")
            assert inside, module
        assert "every token" in svg.locator(".part[data-module='shared_experts']").text_content()
        moe_height = svg.evaluate("s => s.viewBox.baseVal.height")
        slider_top = page.locator("#block-slider").bounding_box()["y"]
        # the dense block: its own, shorter drawing, the output right after the last add
        pick_block(page, 0)
        assert page.locator("#block-slider").bounding_box()["y"] == slider_top  # what is above the drawing stays put
        dense = page.locator("svg.block-svg:not([hidden])")
        dense_height = dense.evaluate("s => s.viewBox.baseVal.height")
        assert dense_height < moe_height
        last_add = max(dense.locator(".part.add circle:not(.hit)").evaluate_all("cs => cs.map(c => c.cy.baseVal.value)"))
        out = dense.locator(".part.terminal circle").evaluate_all("cs => cs.map(c => c.cy.baseVal.value)")[-1]
        assert out - last_add <= 40
        # and no band under it: what follows the drawing comes right after it
        bottom = dense.bounding_box()
        assert page.locator("#identity").bounding_box()["y"] - (bottom["y"] + bottom["height"]) <= 40
        assert not r.errors


# --- words on the pages -----------------------------------------------------------------------------


def test_the_printout_lists_each_value_under_its_module(browser, base, site):
    facts = json.loads((site / "kimi_k2/facts.json").read_text())
    attention = next(h for h in facts["support"]["hosts"] if h["host"] == "layers[i].self_attn")
    with Reader(browser) as r:
        page = r.page
        page.goto(base + FAMILY + "#printout")
        text = page.locator("pre.printout").inner_text()
        lines = text.splitlines()
        first_attn = next(i for i, l in enumerate(lines) if l.strip().startswith("(self_attn):"))
        closing = next(i for i in range(first_attn + 1, len(lines)) if lines[i].strip() == ")")
        inside = "\n".join(lines[first_attn:closing])
        for v in attention["values"]:
            if v["read_at"] is None:
                continue
            line = f"({v['name']}) -> {v['layout']} [{' '.join(v['dims'])}]: {v['description']}"
            assert line in inside.replace("\n", " ").replace("  ", " ") or line in text, line
        assert "(o_proj)" in inside and inside.index("(o_proj)") < inside.index("(attention_queries)")  # after the children
        assert " # " not in text  # no trailing comments
        # at 1280 px nothing of it is cut: no line runs past the box
        assert page.locator("pre.printout").evaluate("p => p.scrollWidth <= p.clientWidth + 1")
        assert not r.errors


def test_small_words(site):
    kimi = (site / "kimi_k2/index.html").read_text()
    gpt2 = (site / "gpt2/index.html").read_text()
    kimi_facts = json.loads((site / "kimi_k2/facts.json").read_text())
    # no "at revision unpinned": a checkpoint.json that pins no revision says so (Gemma 3's, among others)
    from atlas.render.site import render_family

    assert json.loads((ROOT / "atlas/checkpoints/google/gemma-3-1b-it/checkpoint.json").read_text())["revision"] == "unpinned"
    gpt2_facts = json.loads((site / "gpt2/facts.json").read_text())
    revision = gpt2_facts["checkpoint"]["revision"]
    assert f"at revision <code>{revision}</code>" in gpt2
    unpinned = render_family({**gpt2_facts, "checkpoint": {**gpt2_facts["checkpoint"], "revision": "unpinned"}})["gpt2/index.html"]
    assert "at revision" not in unpinned and "no revision is pinned" in unpinned
    # the heading counts the figures it checked: K2's checkpoint.json pins these header figures
    pinned = json.loads((ROOT / "atlas/checkpoints/moonshotai/Kimi-K2-Instruct/checkpoint.json").read_text())["safetensors"]
    checked = sum(1 for row in kimi_facts["checkpoint_check"]["figures"] if row["checked"])
    assert checked == 1 + len(pinned["bytes_by_dtype"]) + sum(1 for k in ("payload_bytes", "weight_parameters", "index_total_size") if k in pinned)
    heading = re.search(r'<h2><a href="#totals">(.*?)</a></h2>', kimi).group(1)
    assert f"{checked} of {len(kimi_facts['checkpoint_check']['figures'])} figures checked" in heading and "partly" not in heading
    # blocks a value is missing in, in numeric order: K2's MLP activation is on the dense block only
    missing = re.search(r'<tr id="value-mlp_activation">.*?</tr>', kimi, re.S).group(0)
    assert f"missing in {LAST}" in missing and f"blocks {DENSE}–{LAST}:" in missing and "and 57 more" not in missing
    # config.json as released: the rope_scaling the pinned file holds, key for key
    released = KIMI["rope_scaling"]
    row = re.search(r"<td><code>rope_scaling</code></td><td><code class=\"json\">(.*?)</code>", kimi).group(1)
    shown = json.loads(row.replace("&#34;", '"').replace("&quot;", '"'))
    assert shown == released and "rope_type" not in shown
    # the block page names every input's dims, as the attention page does
    block = (site / "kimi_k2/c/MoE_block.html").read_text()
    attention = (site / "kimi_k2/c/MoE_block.self_attn.html").read_text()
    dims = lambda page: re.findall(r'<span class="io-item">.*?<code>(\[[^<]*\])</code>', re.search(r'<dt>in</dt>(.*?)</dd>', page, re.S).group(1))
    assert dims(block) == dims(attention) and len(dims(block)) == 3
    assert f"{KIMI['qk_rope_head_dim'] // 2:,} pairs" in dims(block)[1] and "queries" in dims(block)[2]
    # GPT-2's attention is given no rotary angles: its block and attention pages name only x and M
    assert len(dims((site / "gpt2/c/transformer_block.html").read_text())) == 2


def test_the_notes_use_only_what_the_setup_binds(site):
    from atlas.inputs.notes import SHARED_NAMES

    facts = json.loads((site / "kimi_k2/facts.json").read_text())
    setup = facts["notes"]["setup"]
    # a reader's setup loads the family's own class and a tokenizer from the pinned repository
    assert f'repo = "{facts["checkpoint"]["repo"]}"' in setup["checkpoint"]
    assert f"{facts['model']['class']}.from_pretrained(repo" in setup["checkpoint"] and "AutoTokenizer.from_pretrained(repo" in setup["checkpoint"]
    assert "atlas.trace(model) as t" in setup["trace"]
    for name in SHARED_NAMES:  # both setups bind every shared name
        assert re.search(rf"\b{name}\b", setup["checkpoint"] + setup["trace"]) and re.search(rf"\b{name}\b", setup["build"] + setup["trace"]), name
    defined = set(SHARED_NAMES) | set(dir(builtins))
    for block in facts["notes"]["blocks"]:
        tree = ast.parse(block["code"])
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.add(node.name)
                defined |= {a.arg for a in node.args.args} if isinstance(node, ast.FunctionDef) else set()
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                defined.add(node.name)
        loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert loaded <= defined, (block["line"], loaded - defined)
    page = (site / "kimi_k2/index.html").read_text()
    assert 'id="notes-setup"' in page and "from_pretrained(repo" in page


# --- drawings on every value and weight page -------------------------------------------------------


def test_every_value_and_weight_page_draws_the_preview(browser, base, site):
    facts = json.loads((site / "kimi_k2/facts.json").read_text())
    tiny = facts["preview"]["config"]
    embed = facts["preview"]["weight_histograms"]["model.embed_tokens.weight"]
    assert embed["shape"] == [tiny["vocab_size"], tiny["hidden_size"]] and sum(embed["bins"]) == embed["elements"] == tiny["vocab_size"] * tiny["hidden_size"]
    values = sorted((site / "kimi_k2/c").glob("value.*.html"))
    weights = [p for p in sorted((site / "kimi_k2/c").glob("*.html")) if "tensor of " in p.read_text()]
    assert len(values) == len(facts["preview"]["shapes"]) and weights
    for p in values + weights + [p for p in (site / "gpt2/c").glob("*.html")]:
        assert "No preview" not in p.read_text(), p.name
    with Reader(browser) as r:
        page = r.page
        for p in values + weights:
            page.goto(base + f"kimi_k2/c/{p.name}")
            if p.name == "value.input_size.html":  # a pair of numbers, written out: the call's batch and seq
                from atlas.model.preview import PROMPT

                assert page.locator("#previews .values").inner_text().split() == ["batch", "1", "·", "seq", str(len(PROMPT.encode("utf-8")))]
                continue
            assert page.locator("#previews canvas").count() >= 1, p.name
            assert page.locator("#previews canvas").first.evaluate("c => c.width > 0 && c.height > 0")
        page.goto(base + "kimi_k2/c/MoE_block.self_attn.kv_b_proj.weight.html")
        text = page.locator("#preview").inner_text()
        assert "preview model" in text and "random" in text and "not the checkpoint's" in text
        page.goto(base + "kimi_k2/c/value.attention_queries.html")
        first = page.locator("#previews figure.preview").first  # the first block's queries, one head at a time
        heads = first.locator("[aria-label='heads'] button")
        assert heads.count() == tiny["num_heads"]
        before = first.locator(".grid-figure canvas").evaluate("c => c.toDataURL()")
        heads.nth(1).click()
        assert first.locator(".grid-figure canvas").evaluate("c => c.toDataURL()") != before
        assert not r.errors, r.errors


# --- screenshots ------------------------------------------------------------------------------------


SHOTS = {"family": FAMILY + f"#block-{DENSE + 2}", "block": "kimi_k2/c/MoE_block.html", "attention": "kimi_k2/c/MoE_block.self_attn.html",
         "tensor": "kimi_k2/c/MoE_block.self_attn.kv_b_proj.weight.html"}


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 360])
def test_screenshots(browser, base, width, scheme):
    ARTIFACTS.mkdir(exist_ok=True)
    with Reader(browser, width=width, scheme=scheme) as r:
        page = r.page
        for name, path in SHOTS.items():
            page.goto(base + path)
            page.evaluate("document.fonts.ready")
            if name == "family":
                page.click(MOE_PART.format("gate"))
                page.locator("#block").screenshot(path=str(ARTIFACTS / f"reader-{name}-drawing-{width}-{scheme}.png"))
            page.screenshot(path=str(ARTIFACTS / f"reader-{name}-{width}-{scheme}.png"), full_page=True)
            assert (ARTIFACTS / f"reader-{name}-{width}-{scheme}.png").stat().st_size > 10_000
        assert not r.errors
