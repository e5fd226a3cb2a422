"""The code's layout: the atlas laid out by stage, imports that go one way only (down the stages, never in
a circle), modules small enough to find one's way in, and rendering that reads the facts alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

ATLAS = ROOT / "atlas"
PAGES = ATLAS / "render" / "pages"
MOST_LINES = 600  # a module longer than this mixes concerns: split it by what it holds
MOST_PAGE_LINES = 400  # the render layer's page parts, smaller still

# The stages in pipeline order. A module may import its own stage and the stages before it, never one after.
STAGES = ["base", "inputs", "model", "proof", "cost", "facts", "check", "render", "build"]
BASE = {"atlas.errors", "atlas.numbers", "atlas.notation"}  # used by every stage
INPUT_DATA = "atlas.families"  # the family modules: inputs a person writes


def _modules() -> dict[str, Path]:
    found = {}
    for path in ATLAS.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.parts[1] == "families" and rel.name != "__init__":
            continue  # a family module is data: it imports atlas.inputs.family and nothing else of the atlas
        name = ".".join(rel.parts).removesuffix(".__init__")
        found[name] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other atlas modules, at module level and inside functions alike (a
    function's import is a dependency too: it only runs later). A package's own __init__ is not counted."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    return edges


def _stage(module: str) -> str | None:
    if module in BASE:
        return "base"
    if module == INPUT_DATA or module.startswith(INPUT_DATA + "."):
        return "inputs"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_atlas_is_laid_out_by_stage():
    """Every module of the atlas (but the package itself) belongs to a stage, and each stage's package
    says in its docstring what it owns and what it may import."""
    modules = _modules()
    stray = sorted(m for m in modules if m != "atlas" and _stage(m) is None)
    assert not stray, f"modules outside the stages: {stray}"
    for stage in STAGES[1:]:
        doc = ast.get_docstring(ast.parse((ATLAS / stage / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "May import" in doc, f"atlas/{stage}/__init__.py does not say what it owns and may import"


def test_imports_run_down_the_stages():
    edges = _imports(_modules())
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if a != "atlas" and STAGES.index(_stage(b)) > STAGES.index(_stage(a)))
    assert not upward, "imports from a later stage:\n" + "\n".join(upward)


def test_no_import_circle():
    circles = _circles(_imports(_modules()))
    assert not circles, "modules that import each other (through a chain):\n" + "\n".join(" ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle():
    """The check above can fail: a made-up chain a -> b -> c -> a is one circle, d beside it none."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = {"atlas.model.x": {"atlas.render.y"}, "atlas.render.y": set()}
    assert STAGES.index(_stage("atlas.render.y")) > STAGES.index(_stage("atlas.model.x"))
    assert not _circles(edges)


def test_no_module_is_too_long():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"modules over {MOST_LINES} lines: {long}"


def test_the_render_layer_is_a_package_of_small_modules():
    modules = sorted(PAGES.rglob("*.py"))
    assert {"__init__.py", "hierarchy.py", "words.py", "diagram.py", "evidence.py", "values.py"} <= {p.name for p in modules}
    long = {p.relative_to(ROOT).as_posix(): n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST_PAGE_LINES}
    assert not long, f"modules over {MOST_PAGE_LINES} lines: {long}"


def test_check_does_not_import_facts():
    """facts runs two checks while it collects (atlas.facts.early_checks); check must then stand without
    collect, or the two form an import circle. A fresh interpreter shows what importing check pulls in."""
    probe = "import atlas.check.claims, sys; print('atlas.facts.collect' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# Rendering reads the facts alone: torch, transformers, the reader of their source and the collecting
# stages are blocked in a fresh interpreter, and every family of the built site is rendered again from its
# facts.json, page for page as the build wrote it.
RENDER_ALONE = r"""
import importlib.abc, json, sys
BLOCKED = ("torch", "transformers", "atlas.facts.sources", "atlas.facts.collect", "atlas.model.preview",
           "atlas.model.preview_facts", "atlas.model.tiny", "atlas.model.accounting", "atlas.model.checkpoint_layout",
           "atlas.proof", "atlas.model.tool_runs", "nnsight", "nnterp", "transformer_lens", "atlas.inputs.checkpoint")

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"rendering imported {name}")

sys.meta_path.insert(0, Blocked())
from atlas.render.site import render_family, site_entry

site = sys.argv[1]
report = {}
for name in sys.argv[2:]:
    with open(f"{site}/{name}/facts.json", encoding="utf-8") as f:
        facts = json.load(f)
    files = render_family(facts)
    site_entry(facts)
    differ = []
    for rel, text in files.items():
        if rel.endswith(".html"):
            with open(f"{site}/{rel}", encoding="utf-8") as f:
                if f.read() != text:
                    differ.append(rel)
    report[name] = {"pages": len(files), "differ": differ[:3]}
print(json.dumps({"report": report, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))}))
"""


def test_rendering_every_family_reads_the_facts_alone(built_site):
    from atlas import families

    names = families.names()
    result = subprocess.run([sys.executable, "-c", RENDER_ALONE, str(built_site), *names], cwd=ROOT,
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["loaded"] == []
    assert sorted(found["report"]) == sorted(names)
    for name, report in found["report"].items():
        assert report["pages"] > 1 and report["differ"] == [], (name, report)


def test_the_render_probe_can_fail(tmp_path):
    """The blocker is real: rendering with the facts' collector blocked too fails naming the import."""
    probe = RENDER_ALONE.replace('"atlas.inputs.checkpoint")', '"atlas.inputs.checkpoint", "atlas.render.pages")')
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "rendering imported atlas.render.pages" in result.stderr


def _readme_index() -> dict[str, set[str]]:
    """README's module index: each `atlas/<package>/` line and its continuation lines, as names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("The modules, stage by stage"):]
    block = block[:block.index("\n\n", block.index("    atlas/"))]
    index: dict[str, set[str]] = {}
    current = None
    for line in block.splitlines()[1:]:
        head, _, rest = line.strip().partition(" ")
        if head.startswith("atlas/"):
            current = head
            index[current] = set()
        elif not line.startswith("    ") or not line.strip() or head.endswith("/"):
            current = None
            continue
        else:
            rest = line
        if current is not None:
            words = rest.split(":", 1)[-1].split("(+")[0]
            index[current] |= {w.strip() for w in words.split(",") if w.strip()}
    return index


def test_readme_map_names_every_module_of_every_stage():
    index = _readme_index()
    packages = {f"{p.parent.relative_to(ROOT).as_posix()}/" for p in ATLAS.rglob("__init__.py") if p.parent.name != "families"}
    packages.discard("atlas/")
    assert set(index) == packages, f"README's map lists {sorted(index)}, the folders are {sorted(packages)}"
    for package, named in index.items():
        present = {p.stem for p in (ROOT / package).glob("*.py") if p.name != "__init__.py"}
        assert named == present, f"{package}: README names {sorted(named - present)} that are not there, misses {sorted(present - named)}"
