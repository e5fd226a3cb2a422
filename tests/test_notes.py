"""The notes: every python block runs against the preview run, numbers come from the facts, and what
the blocks compute agrees with the reference figures."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from atlas.inputs import notes
from atlas.check.claims import check_notes
from atlas.errors import AtlasError
from tests.conftest import released_config

FAMILIES = Path(__file__).resolve().parent.parent / "atlas" / "families"
NOTES_FILES = {"kimi_k2": ["kimi_k2.md", "deepseek_v3.md"], "deepseek_v3": ["deepseek_v3.md"]}


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_every_python_block_runs_again_here(collected, name):
    from atlas.model.preview import preview_run

    facts = collected(name).facts
    blocks = facts["notes"]["blocks"]
    files = [f"atlas/families/{f}" for f in NOTES_FILES[name]]
    assert facts["notes"]["files"] == files
    # one record per ```python fence of each file, counted here in the files' text
    for file in files:
        fences = re.findall(r"^```python\n", (FAMILIES.parent.parent / file).read_text(), re.M)
        assert len([b for b in blocks if b["file"] == file]) == len(fences) > 0, file
    assert all(b["ran"] is True for b in blocks)
    # Run every block again, in order, in a fresh namespace: each prints what the page shows.
    scope = notes.namespace(facts, preview_run(name))
    for number, block in enumerate(blocks, 1):
        assert notes.run_block(block["code"], scope, Path(block["file"]), number, block["line"]) == block["output"]
    check_notes(facts["notes"])


def yarn_scaling(c, factor):
    """DeepSeek-V3's softmax scale by hand: qk_head_dim^-1/2 × (0.1 · mscale_all_dim · ln(factor) + 1)^2."""
    mscale = 0.1 * c["rope_scaling"]["mscale_all_dim"] * math.log(factor) + 1
    return (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5 * mscale**2


def test_kimi_notes_compute_the_scaling_at_both_yarn_factors(kimi):
    printed = "".join(b["output"] for b in kimi["notes"]["blocks"])
    c = released_config("kimi_k2")
    factor = c["rope_scaling"]["factor"]
    # SPEC §10 and the issue: 0.1309 at factor 32 (K2-Base, -Instruct), 0.1447 at factor 64.
    assert (round(yarn_scaling(c, factor), 4), round(yarn_scaling(c, 2 * factor), 4)) == (0.1309, 0.1447)
    assert f"YaRN factor {factor:g}: self_attn.scaling = {yarn_scaling(c, factor):.4f}" in printed
    assert f"YaRN factor {2 * factor:g}: self_attn.scaling = {yarn_scaling(c, 2 * factor):.4f}" in printed
    assert "model_type 'kimi_k2' known to AutoConfig: False" in printed
    assert "text model type inside the wrapper: deepseek_v3" in printed
    assert f"expert weights per token sum to {c['routed_scaling_factor']}" in printed
    assert "rotary key parts identical across heads: True" in printed


@pytest.mark.parametrize("fence", ["py", "python3", "Python", "python skip"])
def test_a_python_block_that_does_not_run_fails_the_check(kimi, tmp_path, monkeypatch, fence):
    from atlas.families import load
    from atlas.model.preview import preview_run

    written = tmp_path / "kimi_k2.md"
    written.write_text(f"# Notes\n\n```python\nprint('ran', 1 + 1)\n```\n\n```{fence}\nprint('never')\n```\n\nDone.\n")
    monkeypatch.setattr(notes, "FAMILIES", tmp_path)
    facts = notes.family_notes(load("kimi_k2").but(notes=()), kimi, preview_run("kimi_k2"))
    assert facts["files"] == [str(written)]
    assert [(b["line"], b["ran"], b["output"]) for b in facts["blocks"]] == [(3, True, "ran 2\n"), (7, False, "")]
    assert "never" not in "".join(b["output"] for b in facts["blocks"])
    with pytest.raises(AtlasError, match=rf"{re.escape(str(written))}: python block \(line 7\): did not run: its fence says ```{fence}"):
        check_notes(facts)
    # the same file with the second fence made a plain ```python passes
    written.write_text(written.read_text().replace(f"```{fence}\n", "```python\n"))
    facts = notes.family_notes(load("kimi_k2").but(notes=()), kimi, preview_run("kimi_k2"))
    assert [(b["line"], b["ran"], b["output"]) for b in facts["blocks"]] == [(3, True, "ran 2\n"), (7, True, "never\n")]
    check_notes(facts)


def test_a_block_missing_from_the_record_or_marked_not_run_fails_the_check(kimi):
    import copy

    check_notes(kimi["notes"])
    dropped = copy.deepcopy(kimi["notes"])
    gone = dropped["blocks"].pop(2)
    with pytest.raises(AtlasError, match=rf"{gone['file']}: python block \(line {gone['line']}\): did not run: no record"):
        check_notes(dropped)
    unrun = copy.deepcopy(kimi["notes"])
    unrun["blocks"][0]["ran"] = False
    with pytest.raises(AtlasError, match=rf"{unrun['blocks'][0]['file']}: python block \(line {unrun['blocks'][0]['line']}\): did not run"):
        check_notes(unrun)
    moved = copy.deepcopy(kimi["notes"])
    moved["blocks"][0]["line"] += 1
    with pytest.raises(AtlasError, match="did not run: no record"):
        check_notes(moved)


def test_the_fence_scan_follows_commonmark():
    from atlas.check.claims import python_fences

    text = "````markdown\n```python\nnot a block: inside another fence\n```\n````\n\n~~~py\nx\n~~~\n\n```text\n```\n  ```python\ny\n  ```\n"
    assert python_fences(text) == [(7, "py"), (13, "python")]


def test_kimi_notes_in_order_and_rendered(kimi):
    html = kimi["notes"]["html"]
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[0] == "Loading a text-only K2 checkpoint"
    assert headings.index("The block, in order") < headings.index("Latent attention: queries and keys are wider than values")
    assert headings.index("The mixture of experts") < headings.index("The readout")
    assert html.count('<pre class="output"') == sum(1 for b in kimi["notes"]["blocks"] if b["output"])
    assert f"{released_config('kimi_k2')['n_routed_experts']} routed experts" in html and "{{" not in html  # a fact, substituted


def test_no_large_number_is_typed_in_the_notes():
    from atlas.families import names

    paths = sorted(FAMILIES.glob("*.md"))
    assert [p.stem for p in paths] == names()  # every family's notes, so the loop below reads them all
    for path in paths:
        text = re.sub(r"\{\{.*?\}\}", "", path.read_text())
        typed = re.findall(r"(?<![\w.\-])\d{3,}(?![\w])|\d+\.\d{2,}", text)
        assert typed == [], (path.name, typed)


def test_a_placeholder_naming_no_fact_stops_the_build(kimi):
    with pytest.raises(AtlasError, match=r"notes\.md: \{\{ config\.raw\.no_such_key \}\}: names no fact"):
        notes.substitute("{{ config.raw.no_such_key }}", kimi, Path("notes.md"))
    assert notes.substitute("{{ config.raw.n_routed_experts }} experts", kimi, Path("x.md")) == f"{released_config('kimi_k2')['n_routed_experts']} experts"


def test_a_failing_block_names_itself(kimi):
    with pytest.raises(AtlasError, match=r"python block 3 \(line 12\): ZeroDivisionError"):
        notes.run_block("1 / 0", {}, Path("atlas/families/x.md"), 3, 12)


def test_family_page_shows_support_and_notes(kimi):
    from atlas.render.site import render_family

    page = render_family(kimi)["kimi_k2/index.html"]
    assert '<section id="support">' in page and '<section id="notes">' in page
    assert 'id="value-routed_output"' in page and "⚠︎" in page
    # the printout lists the values a module hosts under it, each with its layout
    assert '(<a href="c/value.layer_input.html">layer_input</a>) -&gt; Residual [batch seq hidden_size]' in page
    assert 'id="identity-block_sum"' in page
