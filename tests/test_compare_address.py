"""The page that compares any pair takes the pair from its address (#a--b or #a): a name that is not a
family of the site, including the names every JavaScript object answers to (__proto__, constructor),
leaves the pair as it was, and the view is drawn, never emptied by an exception. In Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CHROMIUM, build_families, served

ADDRESSES = ["#__proto__", "#constructor", "#__proto__--constructor", "#gpt2--__proto__", "#toString--valueOf",
             "#hasOwnProperty", "#__defineGetter__--gpt2"]


@pytest.fixture(scope="module")
def pair_site(tmp_path_factory) -> Path:
    return build_families(tmp_path_factory, "gpt2", "qwen3_0_6b")


def drawn(page) -> dict:
    """What the view shows: the pair picked, and how many rows its config table has."""
    return page.evaluate("""() => ({
        a: document.getElementById('compare-a').value,
        b: document.getElementById('compare-b').value,
        rows: document.querySelectorAll('#compare-view #standardized tbody tr').length })""")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_an_address_that_names_no_family_leaves_the_view_drawn(pair_site, browser):
    with served(pair_site) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base + "compare/index.html#qwen3_0_6b--gpt2")
        page.wait_for_selector("#compare-view #standardized tbody tr")
        shown = drawn(page)
        assert shown["a"] == "qwen3_0_6b" and shown["b"] == "gpt2" and shown["rows"] > 0
        for address in ADDRESSES:
            # loaded afresh with the address ...
            fresh = browser.new_page()
            fresh.on("pageerror", lambda e: errors.append(f"{address} (loaded): {e}"))
            fresh.goto(base + "compare/index.html" + address)  # loaded: its scripts have run
            assert errors == []
            fresh.wait_for_selector("#compare-view #standardized tbody tr")
            first = drawn(fresh)
            assert {first["a"], first["b"]} == {"gpt2", "qwen3_0_6b"} and first["rows"] == shown["rows"], (address, first)
            fresh.close()
            # ... and followed to from a pair: a name that is no family changes nothing of it
            before = drawn(page)
            # (a listener added now runs after the page's own: when it resolves, the page has handled it)
            page.evaluate("""(address) => new Promise((done) => {
                window.addEventListener('hashchange', () => done(), { once: true });
                location.hash = address; })""", address)
            now = drawn(page)
            assert {now["a"], now["b"]} == {"gpt2", "qwen3_0_6b"} and now["rows"] == shown["rows"], (address, now)
            if "gpt2" not in address:
                assert now == before, address
        assert errors == []
        page.close()
