#!/usr/bin/env python3
"""Cold build times of the atlas, and the floor they are compared with.

    python benchmarks/build_time.py            # all families together, then each alone, then the floor
    python benchmarks/build_time.py --quick    # all families together and the floor only

"Cold" means a fresh Python process, as `make site` starts one: every run pays for importing torch and
transformers again. The floor is what no build can avoid: those imports plus building every family's
model on the meta device, measured in a fresh process of its own. The target is every family, cold,
in 60 seconds or less on the project's 2-core machine; the script exits 1 when the full build misses it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 60.0

FLOOR = """
import time
t0 = time.perf_counter()
import torch, transformers
t1 = time.perf_counter()
from atlas import families
from atlas.checkpoint import build_on_meta, load_pinned, transformers_config
for name in families.names():
    family = families.load(name)
    build_on_meta(family, transformers_config(family, load_pinned(family.checkpoint)))
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def cold_build(names: list[str], out: Path) -> float:
    args = [sys.executable, "build.py", "--out", str(out)]
    for name in names:
        args += ["--family", name]
    start = time.perf_counter()
    result = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build of {', '.join(names) or 'every family'} failed:\n{result.stderr}")
    return elapsed


def floor() -> tuple[float, float, float]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", FLOOR], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the floor measurement failed:\n{result.stderr}")
    imports, builds = (float(x) for x in result.stdout.split()[-2:])
    return imports, builds, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the per-family builds")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from atlas import families

    names = families.names()
    with tempfile.TemporaryDirectory() as tmp:
        everything = cold_build([], Path(tmp) / "all")
        print(f"all {len(names)} families, cold: {everything:6.1f} s  (target ≤ {TARGET_SECONDS:.0f} s)")
        if not args.quick:
            for name in names:
                print(f"  {name:<14} cold: {cold_build([name], Path(tmp) / name):6.1f} s")
    imports, builds, process = floor()
    print(f"floor: import torch + transformers {imports:.1f} s, meta builds of all families {builds:.1f} s "
          f"({process:.1f} s for the whole process)")
    print(f"the full build spends {everything - process:.1f} s beyond the floor "
          "(accounting, predicted layouts, excerpts, checks, pages)")
    return 0 if everything <= TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
