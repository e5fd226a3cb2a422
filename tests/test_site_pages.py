"""The written site, read as files: links, offline rules, KaTeX assets, determinism."""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from atlas.families import names
from tests.conftest import ROOT, run_build, search_data


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids, self.meta_csp = [], set(), None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, a[key]))
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.meta_csp = a.get("content")


def parse(path: Path) -> Refs:
    p = Refs()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def pages(built_site):
    return {p: parse(p) for p in sorted(built_site.rglob("*.html"))}


def test_every_internal_link_resolves(built_site, pages):
    # Paths are joined and normalised as strings, against the set of the site's files: the site holds no
    # symbolic links, so this is what resolving each of its million references on disk would find, and a
    # path that leaves the site is in no set of the site's files.
    site = os.path.normpath(built_site)
    files = {os.path.normpath(p) for p in built_site.rglob("*") if p.is_file()}
    ids = {os.path.normpath(p): refs.ids for p, refs in pages.items()}
    any_pair = os.path.join(site, "compare", "index.html")
    checked = 0
    for page, refs in pages.items():
        here = os.path.normpath(page)
        shown = page.relative_to(built_site)
        for tag, ref in refs.refs:
            if ref.startswith("data:"):
                continue
            parts = urlsplit(ref)
            assert not parts.scheme and not parts.netloc, f"{page}: {ref} leaves the site"
            target = here if not parts.path else os.path.normpath(os.path.join(os.path.dirname(here), unquote(parts.path)))
            assert target in files, f"{shown}: {ref} does not resolve"
            if parts.fragment and target.endswith(".html"):
                if parts.fragment not in ids[target] and target == any_pair:
                    # the any-pair page draws what its address names (#a--b, or #a to start from a)
                    assert set(parts.fragment.split("--")) <= set(names()), f"{shown}: {ref} names no family"
                else:
                    assert parts.fragment in ids[target], f"{shown}: #{parts.fragment} missing in {os.path.basename(target)}"
            checked += 1
    assert checked > 1000


def test_every_page_carries_the_csp_and_loads_nothing_off_site(built_site, pages):
    assert {p.relative_to(built_site).parts[0] for p in pages} == {"index.html", "compare", *names()}  # every page, the compare pages too
    for page, refs in pages.items():
        assert refs.meta_csp and "default-src 'self'" in refs.meta_csp and "connect-src 'none'" in refs.meta_csp, page
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text), page
        assert "fetch(" not in text


def test_katex_stylesheet_and_fonts_are_served_from_the_site(built_site):
    installed = ROOT / "node_modules/katex/dist"
    served = built_site / "static/katex"
    # KaTeX's own stylesheet, unedited, and exactly the font files it names, each the installed one.
    assert (served / "katex.min.css").read_bytes() == (installed / "katex.min.css").read_bytes()
    named = set(re.findall(r"url\(([^)]+)\)", (installed / "katex.min.css").read_text(encoding="utf-8")))
    assert {u.rsplit(".", 1)[-1] for u in named} == {"woff2", "woff", "ttf"}
    assert {str(p.relative_to(served)) for p in (served / "fonts").iterdir()} == named
    for ref in named:
        assert (served / ref).read_bytes() == (installed / ref).read_bytes(), ref


def test_katex_is_one_version_from_the_lock_to_the_renderer():
    """The KaTeX whose stylesheet the site serves is the one package-lock.json pins, and the build
    renders with that package: the same markup as the installed KaTeX called directly, for TeX asked
    one at a time and for a family's pages, whose equations are rendered together after the pages."""
    import json
    import subprocess

    from atlas.render import math

    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]["node_modules/katex"]["version"]
    installed = json.loads((ROOT / "node_modules/katex/package.json").read_text())["version"]
    declared = json.loads((ROOT / "package.json").read_text())["dependencies"]["katex"]
    assert locked == installed == declared
    tex = [r"\htmlClass{st-q}{q_t}=W_q\,x_t", r"\operatorname{top}_{8}\,\sigma(z)\in\mathbb{R}^{384}", r"\frac{1}{\sqrt{d}}\sum_{j\le t}e^{s_{tj}}"]
    script = (
        "const katex = require(process.argv[1]); const tex = JSON.parse(process.argv[2]);"
        "process.stdout.write(JSON.stringify({version: katex.version, html: tex.map(t => katex.renderToString(t,"
        " {displayMode: true, output: 'html', trust: true, strict: 'ignore', throwOnError: true}))}));"
    )
    node = json.loads(subprocess.run(["node", "-e", script, str(ROOT / "node_modules/katex"), json.dumps(tex)],
                                     capture_output=True, text=True, check=True, timeout=60).stdout)
    assert node["version"] == installed
    # one rendering (HTML, no MathML copy), named for screen readers by its TeX without the color commands
    labels = [r"{q_t}=W_q\,x_t", r"\operatorname{top}_{8}\,\sigma(z)\in\mathbb{R}^{384}", r"\frac{1}{\sqrt{d}}\sum_{j\le t}e^{s_{tj}}"]
    node["html"] = [h.replace('<span class="katex">', f'<span class="katex" role="img" aria-label="{label}">', 1) for h, label in zip(node["html"], labels)]
    assert all("<math" not in h for h in node["html"])
    assert [math.render(t, True) for t in tex] == node["html"]  # the build's own renderer, one equation at a time
    with math.deferred():  # as a family's pages are rendered: marks first, the equations together after
        pages = {"a.html": f"<p>{math.equation(tex[2])}</p><p>{math.equation(tex[0])}</p>", "b.html": math.equation(tex[1])}
    assert math.fill(pages) == {"a.html": f"<p>{node['html'][2]}</p><p>{node['html'][0]}</p>", "b.html": node["html"][1]}


def test_an_equation_katex_refuses_fails_the_build_naming_it():
    from atlas.render import math
    from atlas.errors import AtlasError

    with pytest.raises(AtlasError, match=r"^equation: \\sqrt\{x: KaTeX cannot render it: KaTeX parse error: Expected '\}', got 'EOF'"):
        with math.deferred():
            marks = [math.equation(r"x^2"), math.equation(r"\sqrt{x"), math.equation(r"\frac{1}{")]
    assert all(mark.startswith("\ue000") for mark in marks)


def test_component_pages_show_the_reference_truth(built_site):
    moe = (built_site / "kimi_k2/c/MoE_block.html").read_text(encoding="utf-8")
    assert "17,059,365,248" in moe and "1,023,561,914,880" in moe  # SPEC §10
    attn = (built_site / "kimi_k2/c/MoE_block.self_attn.html").read_text(encoding="utf-8")
    assert "101,124,096" in attn and "DeepseekV3Attention(config, layer_idx)" in attn
    assert 'class="katex' in attn and "st-q" in attn
    emb = (built_site / "kimi_k2/c/embed_tokens.weight.html").read_text(encoding="utf-8")
    assert "163,840 × 7,168 = 1,174,405,120" in emb


def test_two_builds_are_byte_identical(tmp_path):
    outs = []
    for n in (1, 2):
        out = tmp_path / f"site{n}"
        result = run_build(ROOT, "--family", "kimi_k2", "--out", str(out), fresh=True)
        assert result.returncode == 0, result.stderr
        outs.append(out)
    files = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file())
    for rel in files:
        assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel


def test_a_rebuilt_family_keeps_no_stale_pages(project_copy):
    out = project_copy / "site"
    assert run_build(project_copy, "--family", "kimi_k2", "--out", str(out)).returncode == 0
    stale = out / "kimi_k2/c/no-such-component.html"
    stale.write_text("left over from an older build")
    assert run_build(project_copy, "--family", "kimi_k2", "--out", str(out)).returncode == 0
    assert not stale.exists()
    assert (out / "kimi_k2/c/MoE_block.html").is_file()


def test_the_printout_keeps_one_line_per_module_line(built_site):
    import html
    import json

    facts = json.loads((built_site / "kimi_k2/facts.json").read_text(encoding="utf-8"))
    page = (built_site / "kimi_k2/index.html").read_text(encoding="utf-8")
    pre = re.search(r'<pre class="printout">(.*?)</pre>', page, re.S).group(1)
    lines = html.unescape(re.sub(r"<[^>]+>", "", pre)).splitlines()
    # a module's standard values are listed under it, one line each: "(layer_input) -> Residual [...]: ..."
    values = [line for line in lines if re.match(r"\s*\([a-z_]+\) -> ", line)]
    hosted = sum(len(line["values"]) for line in facts["printout"])
    assert len(values) == hosted > 0
    assert len(lines) - len(values) == len(facts["printout"])
    assert lines[0].startswith("DeepseekV3ForCausalLM(")
    assert any("(1-60): 60 x DeepseekV3DecoderLayer(" in line for line in lines)


def test_a_value_is_listed_only_where_the_family_produces_it(built_site):
    """A value support() places nowhere in a family (GPT-2's router and experts) keeps its support() row,
    saying why, but gets no page, no search entry, no card data, and nothing links to it or names it."""
    import json

    index = (built_site / "index.html").read_text(encoding="utf-8")
    names = search_data(built_site)
    searched = {family: set(found["words"].split()) | set(found["names"]) for family, found in names.items()}
    assert sorted(searched) == sorted(re.findall(r'<li class="card family-card" data-family="([^"]+)"', index))
    absent_in = {}
    for facts_file in sorted(built_site.glob("*/facts.json")):
        facts = json.loads(facts_file.read_text(encoding="utf-8"))
        name = facts["family"]["name"]
        rows = [v for host in facts["support"]["hosts"] for v in host["values"]]
        produced = {v["name"] for v in rows if v["read_at"] is not None and v["blocks"] != []}
        absent = {v["name"] for v in rows} - produced
        absent_in[name] = absent
        assert {p.name[len("value."):-len(".html")] for p in (built_site / name / "c").glob("value.*.html")} == produced, name
        assert produced <= searched[name] and not absent & searched[name], name
        family_page = (built_site / name / "index.html").read_text(encoding="utf-8")
        data = json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>', family_page, re.S).group(1))
        assert set(data["values"]) == produced, name
        for page in (built_site / name).rglob("*.html"):
            text = page.read_text(encoding="utf-8")
            for value in absent:
                assert f"value.{value}.html" not in text and f'data-part="{value}"' not in text, (page, value)
    assert {"router_logits", "expert_weights", "routed_output"} <= absent_in["gpt2"]


def test_a_page_preloads_the_fonts_its_shown_equations_use():
    """The fonts a page preloads are those its equations are set in (KaTeX's stylesheet: \\mathbb in
    KaTeX_AMS, a variable in KaTeX_Math italic, the rest in KaTeX_Main), a list rendered on opening left
    to load its own when opened."""
    from atlas.render import math

    reals, later, inert = r"x\in\mathbb{R}", r"\mathbb{R}", '<template class="on-open">'
    with math.deferred():
        pages = {"plain.html": f"<head>{math.font_mark('../')}</head>{math.equation('x+1')}",
                 "reals.html": f"<head>{math.font_mark('')}</head>{math.equation(reals)}",
                 "later.html": f"<head>{math.font_mark('')}</head>{math.equation('x')}{inert}{math.equation(later)}</template>"}
    filled = math.fill(pages)
    fonts = {path: re.findall(r'fonts/([^" ]+)', re.search(r'name="atlas-math-fonts" content="([^"]*)"', text).group(1)) for path, text in filled.items()}
    assert fonts["plain.html"] == ["KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2"]
    assert fonts["reals.html"] == ["KaTeX_AMS-Regular.woff2", "KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2"]
    assert fonts["later.html"] == ["KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2"]
    assert "../static/katex/fonts/KaTeX_Main-Regular.woff2" in filled["plain.html"] and "\ue002" not in filled["plain.html"]
