#!/usr/bin/env python3
"""Time to math and first paint of Kimi K2's MoE-block and attention pages, their equations rendered at
build time, against a copy of each page whose equations KaTeX renders in the browser, in Chromium.

    .venv/bin/python benchmarks/math_first.py [--site DIR] [--loads 10]

Builds kimi_k2 into a temporary folder (or measures DIR, a site that holds kimi_k2; the copies and
the client script are written into it). The copy is the same page rendered from the same facts and
templates, each equation left as its TeX in a placeholder that KaTeX (katex.min.js from npm) renders
when the document is parsed, as a page rendering its math in the browser does; it preloads no fonts,
since which fonts the math needs is known only once it is rendered. Both are served on
127.0.0.1 as a static host serves them (text gzipped) over the network a phone reader has (Lighthouse's
mobile profile: 150 ms round trips, 1.6 Mbit/s down; ``--network none`` for none), and loaded cold (a
fresh browser context each time, nothing cached), alternating, ``--loads`` times each.

First paint: the first-contentful-paint entry. Time to math: from navigation start to the frame after
the document is parsed, every equation present as KaTeX's markup (no placeholder left) and every font
the page asked for loaded. The ratios are build-rendered over client-rendered medians; the target is
at most 0.5 for time to math and at most 1 for first paint. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import html
import io
import http.server
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGES = ["kimi_k2/c/MoE_block.html", "kimi_k2/c/MoE_block.self_attn.html"]
TARGET_MATH, TARGET_PAINT = 0.5, 1.0
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

# Runs before the page's own scripts: resolves with the time the math is on screen.
WATCH = """
window.__mathShown = new Promise((resolve) => {
  function check() {
    if (document.readyState !== 'loading' && document.querySelector('.katex') && !document.querySelector('.tex-src')) {
      document.fonts.ready.then(() => requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))));
    } else {
      requestAnimationFrame(check);
    }
  }
  requestAnimationFrame(check);
});
"""

# The copy's renderer: every placeholder through KaTeX with the build's options, once the document is parsed.
CLIENT = """document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".tex-src").forEach(function (e) {
    katex.render(e.textContent, e, {displayMode: e.dataset.display === "1", trust: true, strict: "ignore", throwOnError: false});
    e.classList.remove("tex-src");
  });
});
"""


def client_copies(site: Path) -> dict[str, str]:
    """Each measured page rendered again from the site's facts, its equations left to KaTeX in the browser:
    the copy's path (beside the page, so its links and styles resolve alike) by the page's."""
    from atlas.facts import cache
    from atlas.render import math, site as render_site

    cache.enable(False)  # render afresh, nothing written to the cache

    def placeholders(pages: dict[str, str]) -> dict[str, str]:
        def put(m):
            tex, display = math._marked[int(m.group(1))]
            return f'<span class="tex-src" data-display="{int(display)}">{html.escape(tex)}</span>'
        # no font preloads: which fonts a page's math needs is known only once the math is rendered, which
        # is what the copy leaves to the browser; its fonts load when its rendered math asks for them
        return {path: math.FONT_MARK.sub("", math.MARK.sub(put, pages[path])) for path in PAGES}

    facts = json.loads((site / "kimi_k2" / "facts.json").read_text(encoding="utf-8"))
    render_site.fill = placeholders  # the pages as rendered, but with the marks left as TeX
    files = render_site.render_family(facts)
    (site / "static" / "client-math.js").write_text(CLIENT, encoding="utf-8")
    (site / "static" / "katex" / "katex.min.js").write_bytes((ROOT / "node_modules/katex/dist/katex.min.js").read_bytes())
    copies = {}
    for page in PAGES:
        scripts = ('<script src="../../static/katex/katex.min.js" defer></script>'
                   '<script src="../../static/client-math.js" defer></script>\n</head>')
        text = files[page].replace("</head>", scripts, 1)
        if "katex.min.css" not in text:
            text = text.replace("</head>", '<link rel="stylesheet" href="../../static/katex/katex.min.css">\n</head>', 1)
        copy = page.replace(".html", ".client.html")
        (site / copy).write_text(text, encoding="utf-8")
        copies[page] = copy
    return copies


class Host(http.server.SimpleHTTPRequestHandler):
    """A static host: text gzipped for a browser that accepts it, fonts and images as they are."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file() or path.suffix not in (".html", ".css", ".js", ".json") or "gzip" not in self.headers.get("Accept-Encoding", ""):
            return super().send_head()
        body = gzip.compress(path.read_bytes(), 6, mtime=0)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


NETWORKS = {"mobile": {"offline": False, "latency": 150, "downloadThroughput": 1.6e6 / 8, "uploadThroughput": 0.75e6 / 8},
            "none": None}


def load(browser, url: str, network: dict | None) -> tuple[float, float]:
    """One cold load: (first paint, time to math) in milliseconds."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(WATCH)
    page = context.new_page()
    if network:
        context.new_cdp_session(page).send("Network.emulateNetworkConditions", network)
    page.goto(url, wait_until="commit")
    shown = page.evaluate("window.__mathShown")
    paint = page.evaluate("new Promise(r => { const f = () => { const e = performance.getEntriesByName('first-contentful-paint')[0];"
                          " e ? r(e.startTime) : requestAnimationFrame(f); }; f(); })")
    context.close()
    return paint, shown


def measure(site: Path, loads: int, network: dict | None) -> list[dict]:
    from playwright.sync_api import sync_playwright

    copies = client_copies(site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Host, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for page, copy in copies.items():
                load(browser, base + page, network)  # warm the server and the browser's own startup, not measured
                built, client = [], []
                for i in range(loads):  # alternating, so that a slow moment of the machine falls on both
                    order = [(built, page), (client, copy)] if i % 2 == 0 else [(client, copy), (built, page)]
                    for into, path in order:
                        into.append(load(browser, base + path, network))
                row = {"page": page, "bytes": (site / page).stat().st_size, "client_bytes": (site / copy).stat().st_size}
                for key, index in (("paint", 0), ("math", 1)):
                    row[f"{key}_built"] = statistics.median(t[index] for t in built)
                    row[f"{key}_client"] = statistics.median(t[index] for t in client)
                    row[f"{key}_ratio"] = row[f"{key}_built"] / row[f"{key}_client"]
                results.append(row)
            browser.close()
    finally:
        server.shutdown()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="a built site holding kimi_k2 (default: build one)")
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--network", choices=sorted(NETWORKS), default="mobile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "site"
            subprocess.run([sys.executable, "build.py", "--family", "kimi_k2", "--out", str(site)], cwd=ROOT, check=True)
        results = measure(site, args.loads, NETWORKS[args.network])
    ok = True
    for r in results:
        print(f"{r['page']}: {r['bytes']:,} bytes built, {r['client_bytes']:,} bytes + KaTeX's script client-side")
        print(f"  first paint  {r['paint_built']:7.1f} ms built, {r['paint_client']:7.1f} ms client: ratio {r['paint_ratio']:.2f} (target <= {TARGET_PAINT})")
        print(f"  time to math {r['math_built']:7.1f} ms built, {r['math_client']:7.1f} ms client: ratio {r['math_ratio']:.2f} (target <= {TARGET_MATH})")
        ok &= r["paint_ratio"] <= TARGET_PAINT and r["math_ratio"] <= TARGET_MATH
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
