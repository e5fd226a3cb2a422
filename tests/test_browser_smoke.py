"""A real Chromium, driven by Playwright, against the generated site served on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@pytest.fixture(scope="module")
def served(built_site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_family_page_shows_the_checked_total(served, browser):
    page = browser.new_page()
    errors, off_origin = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: off_origin.append(r.url) if not r.url.startswith(served) else None)
    page.goto(f"{served}/index.html")
    page.get_by_role("link", name="Kimi K2").first.click()
    page.wait_for_url("**/kimi_k2/index.html")
    assert page.get_by_role("heading", level=1).inner_text() == "Kimi K2"
    # 2 × 163,840 × 7,168 + 7,168 + 497,500,160 + 60 × 17,059,365,248, written out by the page.
    assert "1,026,408,232,448" in page.inner_text("body")
    assert errors == [] and off_origin == []
    page.close()
