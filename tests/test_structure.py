"""The code's layout: the render layer split by page part, small enough to find one's way in."""

from __future__ import annotations

from tests.conftest import ROOT

PAGES = ROOT / "atlas" / "pages"
MOST_LINES = 400


def test_the_render_layer_is_a_package_of_small_modules():
    assert not (ROOT / "atlas" / "components.py").exists()
    modules = sorted(PAGES.rglob("*.py"))
    assert {"__init__.py", "hierarchy.py", "equations.py", "words.py", "diagram.py", "evidence.py", "values.py"} <= {p.name for p in modules}
    long = {p.relative_to(ROOT).as_posix(): n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"modules over {MOST_LINES} lines: {long}"

