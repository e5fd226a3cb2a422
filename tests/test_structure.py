"""The code's layout: the render layer split by page part, small enough to find one's way in, and
imports that go one way only."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PAGES = ROOT / "atlas" / "render" / "pages"
MOST_LINES = 400


def test_the_render_layer_is_a_package_of_small_modules():
    assert not (ROOT / "atlas" / "components.py").exists()
    modules = sorted(PAGES.rglob("*.py"))
    assert {"__init__.py", "hierarchy.py", "words.py", "diagram.py", "evidence.py", "values.py"} <= {p.name for p in modules}
    long = {p.relative_to(ROOT).as_posix(): n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"modules over {MOST_LINES} lines: {long}"


def test_check_does_not_import_facts():
    """facts runs some checks while it collects; check must then stand without facts, or the two form
    an import circle. A fresh interpreter shows what importing check pulls in."""
    probe = "import atlas.check.claims, sys; print('atlas.facts.collect' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
