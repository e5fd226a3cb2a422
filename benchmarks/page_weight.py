#!/usr/bin/env python3
"""Page weight and slider redraw time of the Kimi K2 family page, measured in Chromium.

    .venv/bin/python benchmarks/page_weight.py [--site DIR]

Builds kimi_k2 into a temporary folder (or measures DIR), serves it on 127.0.0.1 and opens the family
page in Debian's Chromium. Page weight: the bytes of every response the page loads, fonts excluded
(budget 300 KB). Redraw: the time from setting the block slider to the end of the style and layout
that follow, for every block in both directions, five rounds; a move's time is its fastest round
(the others carry noise from whatever else runs on the machine), and the budget (16 ms, one frame at
60 Hz) applies to the slowest move. Exit status 1 when a budget is exceeded.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEIGHT_BUDGET = 300 * 1024
REDRAW_BUDGET_MS = 16.0
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

REDRAW = """() => {
  const slider = document.querySelector('#block-slider');
  const n = Number(slider.max) + 1, times = [];
  for (let round = 0; round < 10; round++) {
    for (let i = 0; i < n; i++) {
      const j = round % 2 ? n - 1 - i : i;
      const t0 = performance.now();
      slider.value = String(j);
      slider.dispatchEvent(new Event('input', {bubbles: true}));
      document.body.getBoundingClientRect();   // force style and layout now
      void document.querySelector('svg.block-svg:not([hidden])').getBBox();
      times.push([round % 2, j, performance.now() - t0]);
    }
  }
  return times;
}"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def measure(site: Path) -> dict:
    from playwright.sync_api import sync_playwright

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    responses = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("response", lambda r: responses.append(r))
            page.goto(base + "kimi_k2/index.html", wait_until="load")
            page.evaluate("document.fonts.ready")
            loaded = [(r.url[len(base):], len(r.body())) for r in responses]
            raw = page.evaluate(REDRAW)
            browser.close()
    finally:
        server.shutdown()
    best: dict = {}
    for direction, j, ms in raw:
        best[(direction, j)] = min(ms, best.get((direction, j), ms))
    times = list(best.values())
    counted = [(u, n) for u, n in loaded if not u.endswith((".woff2", ".woff", ".ttf"))]
    return {
        "files": counted,
        "fonts": [(u, n) for u, n in loaded if (u, n) not in counted],
        "weight": sum(n for _, n in counted),
        "redraw_max": max(times),
        "redraw_median": statistics.median(times),
        "redraw_p95": sorted(times)[int(0.95 * len(times)) - 1],
        "redraws": len(times),
        "first": raw[1][2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="a built site to measure (default: build kimi_k2 into a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            subprocess.run([sys.executable, "build.py", "--family", "kimi_k2", "--out", str(site)], cwd=ROOT, check=True, capture_output=True)
        r = measure(site)
    print("Kimi K2 family page, as Chromium loads it:")
    for url, n in r["files"]:
        print(f"  {n:>9,} B  {url}")
    print(f"  {r['weight']:>9,} B  in all, fonts excluded (budget {WEIGHT_BUDGET:,} B)")
    if r["fonts"]:
        print(f"  ({sum(n for _, n in r['fonts']):,} B of fonts in {len(r['fonts'])} files, not counted)")
    print(f"Slider redraw over {r['redraws']} moves (each its fastest of 5 rounds): median {r['redraw_median']:.2f} ms, p95 {r['redraw_p95']:.2f} ms, "
          f"max {r['redraw_max']:.2f} ms (budget {REDRAW_BUDGET_MS:.0f} ms); the very first kind change took {r['first']:.2f} ms")
    ok = r["weight"] <= WEIGHT_BUDGET and r["redraw_max"] <= REDRAW_BUDGET_MS
    print("within budget" if ok else "OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
