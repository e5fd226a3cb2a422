"""Evidence that contains what it claims: every excerpt a page cites holds the call, attribute or
operation it is cited for, and an excerpt that does not fails the build in one line."""

from __future__ import annotations

import copy
import re
from importlib import metadata

import pytest

from atlas import pages, sources
from atlas.check import check_pages
from atlas.errors import AtlasError

KV_B = ("dense_block.self_attn.kv_b_proj", "MoE_block.self_attn.kv_b_proj")


@pytest.fixture(scope="module")
def kimi_view(kimi):
    return pages.site(kimi)


@pytest.fixture(scope="module")
def gpt2(collected):
    return collected("gpt2").facts


@pytest.fixture(scope="module")
def gpt2_view(gpt2):
    return pages.site(gpt2)


def code_lines(text: str) -> list[str]:
    """The excerpt's lines with comments cut off (the test's own reading, a plain split on '#')."""
    return [line.split("#")[0] for line in text.splitlines()]


def test_the_attention_pins_the_method_its_forward_leaves_kv_b_proj_to(kimi):
    parts = kimi["excerpts"]["DeepseekV3Attention"]
    assert {"__init__", "forward", "expand_kv"} <= set(parts)
    expand = parts["expand_kv"]
    assert expand["qualname"] == "DeepseekV3Attention.expand_kv"
    sources.verify([expand])  # its sha256 against the installed file, like every other excerpt
    installed = metadata.distribution("transformers").locate_file("transformers") / expand["path"]
    lines = installed.read_text().splitlines(keepends=True)
    assert "".join(lines[expand["start"] - 1 : expand["end"]]) == expand["text"]
    assert any("self.kv_b_proj(" in line for line in code_lines(expand["text"]))
    assert not any("self.kv_b_proj(" in line for line in code_lines(parts["forward"]["text"]))
    assert any("self.expand_kv(" in line for line in code_lines(parts["forward"]["text"]))


@pytest.mark.parametrize("nid", KV_B)
def test_kv_b_proj_cites_an_excerpt_that_calls_it(kimi_view, kimi, nid):
    page = kimi_view["nodes"][nid]
    calls = [e for e in page["evidence"] if any("self.kv_b_proj(" in line for line in code_lines(e["text"]))]
    assert calls, [(e["class"], e["part"]) for e in page["evidence"]]
    for e in calls:
        pinned = kimi["excerpts"][e["class"]][e["part"]]
        assert (e["path"], e["start"], e["end"], e["sha256"]) == (pinned["path"], pinned["start"], pinned["end"], pinned["sha256"])
        assert "self.kv_b_proj(" in e["contains"]
        marked = [e["text"].splitlines()[n - e["start"]] for n in e["marks"]]
        assert marked and all("self.kv_b_proj(" in line for line in marked)
    # no item of the page cites an excerpt that lacks what it says it contains
    for e in page["evidence"]:
        for text in e["contains"]:
            assert any(text in line for line in code_lines(e["text"])), (e["class"], e["part"], text)
    # the attention's own page cites expand_kv as direct evidence, with the forward's call of it
    attention = kimi_view["nodes"][nid.rsplit(".", 1)[0]]["evidence"]
    direct = {e["part"]: e for e in attention if e["direct"]}
    assert "self.kv_b_proj(" in direct["expand_kv"]["contains"]
    assert "self.expand_kv(" in direct["forward"]["contains"]


@pytest.mark.parametrize("family", ["kimi_k2", "gpt2"])
def test_every_cited_text_is_in_the_cited_lines(request, family):
    view = request.getfixturevalue("kimi_view" if family == "kimi_k2" else "gpt2_view")
    cited = 0
    for nid, node in view["nodes"].items():
        for e in node["evidence"]:
            if e["direct"]:
                assert e["contains"], (nid, e["class"], e["part"])
            lines = code_lines(e["text"])
            for text in e["contains"]:
                assert any(text in line for line in lines), (nid, e["class"], e["part"], text)
                cited += 1
            assert all(e["start"] <= n <= e["end"] for n in e["marks"])
            assert all(any(t in lines[n - e["start"]] for t in e["contains"]) for n in e["marks"])
    assert cited > 50


def test_an_excerpt_that_lacks_its_claimed_call_fails_the_check_in_one_line(kimi_view, kimi):
    check_pages(kimi_view, "kimi_k2")  # the real pages pass
    broken = copy.deepcopy(kimi_view)
    nid = "MoE_block.self_attn.kv_b_proj"
    forward = kimi["excerpts"]["DeepseekV3Attention"]["forward"]
    items = broken["nodes"][nid]["evidence"]
    calling = next(i for i, e in enumerate(items) if "self.kv_b_proj(" in e["contains"])
    # the attention's forward in place of the method that holds the call, still claiming the call
    items[calling] = {**items[calling], "part": "forward", **{k: forward[k] for k in ("path", "start", "end", "sha256", "text", "qualname")}}
    with pytest.raises(AtlasError) as caught:
        check_pages(broken, "kimi_k2")
    message = str(caught.value)
    assert "\n" not in message
    assert message == (f"family kimi_k2: {nid}: the evidence DeepseekV3Attention.forward "
                       f"({forward['path']} lines {forward['start']}–{forward['end']}) does not contain `self.kv_b_proj(`")


def test_a_cited_excerpt_must_be_the_pinned_text(kimi_view):
    broken = copy.deepcopy(kimi_view)
    ev = broken["nodes"]["MoE_block.self_attn"]["evidence"][0]
    ev["text"] = ev["text"] + "        self.kv_b_proj(x)\n"  # text added to an excerpt keeps its old hash
    with pytest.raises(AtlasError, match="MoE_block.self_attn: the evidence .* shows other lines than the pinned excerpt"):
        check_pages(broken, "kimi_k2")


def test_a_call_in_a_comment_or_a_longer_name_is_not_contained():
    ex = {"start": 10, "text": "    # y = self.kv_b_proj(x)\n    y = self.kv_b_proj_extra(x)\n    z = self.kv_b_proj(x)  # here\n"}
    assert sources.lines_containing(ex, "self.kv_b_proj(") == [12]
    assert sources.lines_containing(ex, "self.kv_b_proj") == [12]
    assert sources.lines_containing({"start": 1, "text": "    # self.weight\n"}, "self.weight") == []


def test_a_component_forward_holds_the_children_its_steps_run(kimi_view, kimi):
    for nid in ("MoE_block", "MoE_block.mlp", "MoE_block.self_attn", "model"):
        proof = kimi["equations"]["components"][nid]
        texts = [t for e in kimi_view["nodes"][nid]["evidence"] if e["direct"] for t in e["contains"]]
        for attr in proof["reads"]:
            assert f"self.{attr}(" in texts or f"self.{attr}" in texts, (nid, attr)
    # the router's forward computes with the scores the proof measured (sigmoid in Kimi K2)
    gate = kimi["equations"]["components"]["MoE_block.mlp.gate"]
    assert gate["facts"]["routing"]["value"].startswith("sigmoid")
    forward = next(e for e in kimi_view["nodes"]["MoE_block.mlp.gate"]["evidence"] if e["part"] == "forward")
    assert {"self.weight", "self.e_score_correction_bias", "sigmoid"} <= set(forward["contains"])


def test_gpt2_outside_modules_cite_the_class_that_calls_them(gpt2_view, gpt2):
    # GPT2LMHeadModel holds the base model as self.transformer; the embeddings are the base model's
    assert gpt2["model"]["containers"] == {"": "GPT2LMHeadModel", "transformer": "GPT2Model"}
    for nid, attr in (("wte", "wte"), ("wpe", "wpe"), ("ln_f", "ln_f")):
        contextual = [e for e in gpt2_view["nodes"][nid]["evidence"] if not e["direct"]]
        assert {e["class"] for e in contextual} == {"GPT2Model"}
        assert f"self.{attr}(" in next(e for e in contextual if e["part"] != "__init__")["contains"]
    head = [e for e in gpt2_view["nodes"]["lm_head"]["evidence"] if not e["direct"]]
    assert {e["class"] for e in head} == {"GPT2LMHeadModel"}


def test_the_built_page_marks_the_lines_that_hold_the_call(built_site):
    page = (built_site / "kimi_k2/c/MoE_block.self_attn.kv_b_proj.html").read_text()
    marked = re.findall(r'<mark class="hit">(.*?)</mark>', page)
    assert any("self.kv_b_proj(" in m for m in marked)
    assert "<code>self.kv_b_proj(</code>" in page

