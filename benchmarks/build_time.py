#!/usr/bin/env python3
"""Build times of the atlas, cold and warm, each beside the floor it is compared with.

    python benchmarks/build_time.py            # every measurement below
    python benchmarks/build_time.py --quick    # without the serial full build and the per-family cold builds
    python benchmarks/build_time.py --serve-only   # gpt2 alone: cold, after a notes edit, and under --serve
    python benchmarks/build_time.py --quick --repeat 3   # also every family cold (--no-cache) 3 more times,
                                                         # each beside a floor measured just before it

Every build is a fresh `python build.py` process, as `make site` starts one, in a temporary copy of the
project (so the copy's .atlas-cache/ starts empty, and the notes edit never touches the real notes):

- cold, every family: serial (--jobs 1) and parallel (one worker per core), nothing cached;
- cold, one family (--no-cache), and each family alone (not with --quick);
- warm no-op: one family rebuilt into the full site with nothing changed, then every family;
- one family after its notes were edited (it alone is collected again);
- under `build.py --serve`: a notes edit of gpt2 to the open page reloaded with it (Chromium, where
  Debian's is installed; else to the rebuilt page served), edited several times in the warm worker.

A machine whose speed drifts (a shared host's can, by a third within the hour) moves a build and its
floor alike, so the ratio of the two is the figure to compare between machines; ``--repeat`` measures
the pair that many times, alternately, and prints their medians.

The floors: for a cold build, what no cold build can avoid, measured in a fresh process of its own:
importing torch and transformers plus building the families' models on the meta device. For a warm
build, a fresh process importing what renders and writes a site (no torch). The targets: every family
cold in 60 s or less on the project's 2-core machine; a warm no-op of one family in 0.5 s or less and
in at most 10% of its cold build; a notes edit under --serve reloaded in 2 s or less (the median of
the edits after the first). The script exits 1 when any target is missed.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("atlas", "templates", "static", "build.py", "requirements.lock", "package-lock.json")
FAMILY = "gpt2"  # the one-family measurements: one of the quickest families to collect
TARGET_SECONDS = 60.0
NO_OP_SECONDS = 0.5
NO_OP_SHARE = 0.10
SERVE_EDIT_SECONDS = 2.0
SERVE_EDITS = 4
CHROMIUM = "/usr/bin/chromium"

COLD_FLOOR = """
import sys, time
t0 = time.perf_counter()
import torch, transformers
t1 = time.perf_counter()
from atlas import families
from atlas.inputs.checkpoint import build_on_meta, transformers_config
from atlas.inputs.preflight import check_inputs
for name in sys.argv[1:] or families.names():
    family, checkpoint = check_inputs(name)  # as a build reads it (a multimodal wrapper: its text model's section)
    build_on_meta(family, transformers_config(family, checkpoint), checkpoint.config_path)
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""

WARM_FLOOR = "import build, atlas.check.claims, atlas.facts.schema, atlas.render.site, atlas.facts.cache, atlas.build.parallel"


def copy_project(into: Path) -> Path:
    for part in PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, into / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / part)
    (into / "node_modules").symlink_to(ROOT / "node_modules")
    return into


def timed(project: Path, *args: str) -> float:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, *args], cwd=project, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stderr}")
    return elapsed


def build(project: Path, out: str, *args: str) -> float:
    return timed(project, "build.py", "--out", out, *args)


def cold_floor(project: Path, *names: str) -> float:
    """The whole floor process: start-up, the imports, the meta-device builds."""
    return timed(project, "-c", COLD_FLOOR, *names)


def serve_notes_edits(project: Path, edits: int = SERVE_EDITS) -> tuple[list[float], str]:
    """Seconds from each notes edit to the open page showing it, under `build.py --serve` (the worker
    ready first, as it is a few seconds after the server starts), and how the page was watched."""
    server = subprocess.Popen([sys.executable, "build.py", "--family", FAMILY, "--out", "served", "--serve", "0"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()

    def printed(pattern: str) -> re.Match:
        while True:
            found = re.search(pattern, lines.get(timeout=600))
            if found:
                return found

    notes = project / "atlas" / "families" / f"{FAMILY}.md"
    try:
        url = printed(r"at (http://127\.0\.0\.1:\d+/)")[1] + f"{FAMILY}/index.html"
        printed(r"^worker \d+ ready")
        with _page(url) as shows:
            seconds, rebuilt = [], []
            for n in range(edits):
                marker = f"Benchmark edit {n} under serve."
                notes.write_text(notes.read_text(encoding="utf-8") + f"\n{marker}\n", encoding="utf-8")
                start = time.perf_counter()
                while not shows(marker):
                    time.sleep(0.02)
                seconds.append(time.perf_counter() - start)
                rebuilt.append(float(printed(r"^rebuilt \S+ in ([\d.]+) s")[1]))
                time.sleep(1)  # the page settled: the next edit starts from a page at rest
        return seconds, f"{shows.__doc__}; the rebuilds alone: " + ", ".join(f"{r:.1f}" for r in rebuilt)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


class _page:
    """A way to ask whether the page at ``url`` shows a text: the page open in Chromium, reloading
    itself as the served pages do; else the page fetched afresh each time (no reload counted)."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self):
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            sync_playwright = None
        if sync_playwright is None or not Path(CHROMIUM).exists():
            def fetched(text: str) -> bool:
                """to the rebuilt page served (no Chromium here: the reload not counted)"""
                with urllib.request.urlopen(self.url) as response:
                    return text in response.read().decode("utf-8")
            self.playwright = None
            return fetched
        self.playwright = sync_playwright().start()
        browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(self.url)

        page.evaluate("window.atlasBenchmarkOld = true")

        def shown(text: str) -> bool:
            """to the page open in Chromium reloaded with the edit"""
            try:  # cheap until the page has been replaced by a newly loaded one: the poll must not load the machine
                if page.evaluate("window.atlasBenchmarkOld === true || document.readyState !== 'complete'"):
                    return False
                if page.evaluate("(text) => document.body.innerText.includes(text)", text):
                    page.evaluate("window.atlasBenchmarkOld = true")
                    return True
                page.evaluate("window.atlasBenchmarkOld = true")  # reloaded, but not yet with this edit
                return False
            except Exception:  # noqa: BLE001 - between two documents while it reloads
                return False
        return shown

    def __exit__(self, *exc):
        if self.playwright is not None:
            self.playwright.stop()


def median_of_three(measure) -> float:
    return statistics.median(measure() for _ in range(3))


def row(label: str, seconds: float, floor: float | None = None, note: str = "") -> None:
    beside = f"   floor {floor:6.2f} s   × {seconds / floor:5.2f}" if floor else ""
    print(f"{label:<44} {seconds:7.2f} s{beside}{('   ' + note) if note else ''}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the serial full build and the per-family cold builds")
    parser.add_argument("--repeat", type=int, default=0, metavar="N",
                        help="also build every family cold (--no-cache) N more times, each beside a fresh floor, and print the medians")
    parser.add_argument("--serve-only", action="store_true",
                        help=f"only the one-family measurements: {FAMILY} cold, rebuilt after a notes edit, and the same under --serve")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from atlas import families
    from atlas.build.parallel import default_jobs

    names = families.names()
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp) / "project")
        print(f"{len(names)} families, {os.cpu_count()} cores, {default_jobs()} workers by default", flush=True)
        floor_one = cold_floor(project, FAMILY)
        cold_one = build(project, "one", "--no-cache", "--family", FAMILY)
        row(f"cold, one family ({FAMILY})", cold_one, floor_one)
        if args.serve_only:
            build(project, "site", "--family", FAMILY)  # the cache filled, as the full build below fills it
        else:
            floor_all = cold_floor(project)
            floor_warm = median_of_three(lambda: timed(project, "-c", WARM_FLOOR))

            serial = None
            if not args.quick:
                serial = build(project, "serial", "--no-cache", "--jobs", "1")
                row("cold, every family, serial (--jobs 1)", serial, floor_all)
            everything = build(project, "site")  # the copy's cache is empty: cold, and it fills the cache
            note = f"{everything / serial:.2f} of serial" if serial else ""
            row(f"cold, every family, parallel ({default_jobs()} workers)", everything, floor_all, note)
            if everything > TARGET_SECONDS:
                missed.append(f"every family cold in {TARGET_SECONDS:.0f} s")

            if args.repeat > 0:
                pairs = [(cold_floor(project), build(project, f"again-{i}", "--no-cache")) for i in range(args.repeat)]
                floor, cold = statistics.median(f for f, _ in pairs), statistics.median(c for _, c in pairs)
                row(f"  the same, --no-cache, median of {args.repeat}", cold, floor,
                    "each: " + ", ".join(f"{c:.1f} s (× {c / f:.2f})" for f, c in pairs))
                if cold > TARGET_SECONDS:
                    missed.append(f"every family cold in {TARGET_SECONDS:.0f} s (the median of the repeats)")

            if not args.quick:
                for name in names:
                    row(f"  cold, {name} alone", build(project, f"alone-{name}", "--no-cache", "--family", name))

            no_op = median_of_three(lambda: build(project, "site", "--family", FAMILY))
            row(f"warm no-op, one family ({FAMILY}) into the full site", no_op, floor_warm, f"{no_op / cold_one:.1%} of its cold build")
            if no_op > NO_OP_SECONDS or no_op > NO_OP_SHARE * cold_one:
                missed.append(f"a warm no-op of one family in {NO_OP_SECONDS} s and {NO_OP_SHARE:.0%} of its cold build")
            row("warm no-op, every family", median_of_three(lambda: build(project, "site")), floor_warm)

        notes = project / "atlas" / "families" / f"{FAMILY}.md"
        notes.write_text(notes.read_text(encoding="utf-8") + "\nA line the benchmark added.\n", encoding="utf-8")
        row(f"one family ({FAMILY}) after a notes edit", build(project, "site", "--family", FAMILY), floor_one)

        edits, how = serve_notes_edits(project)
        later = statistics.median(edits[1:])
        row(f"--serve: a notes edit of {FAMILY}, median of {len(edits) - 1}", later, floor_one,
            f"{how}; the first edit after the worker started: {edits[0]:.2f} s; each: " + ", ".join(f"{e:.2f}" for e in edits))
        if later > SERVE_EDIT_SECONDS:
            missed.append(f"a notes edit under --serve reloaded in {SERVE_EDIT_SECONDS:.0f} s")
    print("floors: cold = a fresh process importing torch and transformers and building the models on the meta "
          "device; warm = a fresh process importing the render path")
    print("--serve: from the notes file written to the open page showing it (the watcher's poll, the rebuild in the "
          "warm worker, the page's poll and reload); the first edit also renders the page's equations, which the "
          "worker then keeps")
    for target in missed:
        print(f"missed: {target}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
