"""The field's own tools: each value's access in nnsight, nnterp and TransformerLens, checked on the run.

The expected accesses are written from the libraries' documented names and the module trees transformers
gives these classes (GPT-2 keeps its blocks in transformer.h, Llama in model.layers), not copied from the
facts; a wrong access (the next block's output, the block's input for its output) must stop a real build
in one line naming the family, the value and the library.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT


@cache
def tools_of(family: str):
    from atlas.model.preview import preview_run
    from atlas.model.tool_runs import tools_facts

    return tools_facts(preview_run(family), family)


def texts(facts, value: str, library: str) -> list[str]:
    return [a["text"] for a in facts["values"][value][library]["accesses"]]


def test_llama_is_reached_by_all_three_libraries_with_their_own_names():
    facts = tools_of("llama")
    assert all(lib["loads"] for lib in facts["libraries"].values()), facts["libraries"]
    assert facts["libraries"]["nnsight"]["version"] == "0.7.0"
    # nnsight: the module path from the root of LlamaForCausalLM, .output of the block, checked at its 3 tiny blocks
    assert facts["values"]["layer_output"]["nnsight"]["accesses"] == [{"text": "model.model.layers[i].output", "blocks": [0, 1, 2]}]
    assert texts(facts, "layer_input", "nnsight") == ["model.model.layers[i].input"]
    assert texts(facts, "mlp_output", "nnsight") == ["model.model.layers[i].mlp.output"]
    assert texts(facts, "attention_output", "nnsight") == ["model.model.layers[i].self_attn.output[0]"]
    assert texts(facts, "final_norm_output", "nnsight") == ["model.model.norm.output"]
    assert texts(facts, "logits", "nnsight") == ["model.output.logits"]
    # the attention function's results, through nnsight's .source of the attention's forward
    assert texts(facts, "attention_probabilities", "nnsight") == ["model.model.layers[i].self_attn.source.attention_interface_0.output[1]"]
    # nnterp's standardized accessors
    assert texts(facts, "layer_output", "nnterp") == ["model.layers_output[i]"]
    assert texts(facts, "attention_output", "nnterp") == ["model.attentions_output[i]"]
    assert texts(facts, "attention_probabilities", "nnterp") == ["model.attention_probabilities[i]"]
    # TransformerBridge's hooks
    assert texts(facts, "layer_input", "transformer_lens") == ['cache[f"blocks.{i}.hook_resid_pre"]']
    assert texts(facts, "attention_probabilities", "transformer_lens") == ['cache[f"blocks.{i}.attn.hook_pattern"]']
    # a value a library has no name for says so
    assert facts["values"]["mlp_norm_output"]["nnterp"] == {"accesses": [], "why": "nnterp has no standardized accessor for it", "quoted": False}


def test_gpt2_paths_come_from_its_own_module_tree():
    facts = tools_of("gpt2")
    assert texts(facts, "layer_output", "nnsight") == ["model.transformer.h[i].output"]
    assert texts(facts, "position_embeddings", "nnsight") == ["model.transformer.wpe.output"]
    assert texts(facts, "mlp_neurons", "nnsight") == ["model.transformer.h[i].mlp.c_proj.input"]


def test_deepseek_v3_hook_z_splits_heads_wrongly_and_the_shape_check_says_so():
    """TransformerLens splits DeepSeek-V3's head outputs by the query-key head size: 8 heads of 8 where
    the attention has 4 heads of 16 (the tiny config's v_head_dim). The shape check catches it."""
    facts = tools_of("deepseek_v3")
    entry = facts["values"]["attention_premix"]["transformer_lens"]
    assert entry["accesses"] == []
    assert "(1, 31, 8, 8)" in entry["why"] and "(1, 31, 4, 16)" in entry["why"], entry["why"]
    # nnsight reads it at the output projection's input, split by the 4 heads, at every block
    assert texts(facts, "attention_premix", "nnsight") == ["model.model.layers[i].self_attn.o_proj.input.unflatten(-1, (num_heads, -1))"]


def test_a_library_that_cannot_load_a_family_says_so_once_with_its_message():
    facts = tools_of("qwen3_next")
    nnterp = facts["libraries"]["nnterp"]
    assert nnterp["loads"] is False and "self_attn" in nnterp["message"], nnterp
    for value in facts["values"].values():
        assert value["nnterp"]["accesses"] == []
    # the library's own words are marked as such: the page quotes them verbatim
    assert facts["values"]["layer_output"]["nnterp"]["quoted"] is True


def test_compare_tells_shape_from_values():
    import torch

    from atlas.model.tool_runs import compare

    x = torch.arange(12.0).reshape(1, 3, 4)
    assert compare(x.clone(), x) is None
    assert compare(x.reshape(1, 4, 3), x).startswith("shape:")
    assert compare(x + 1, x) == "values: they differ by up to 1"
    assert compare((x,), x).startswith("shape:")
    masked = torch.tensor([[0.5, float("-inf")]])
    assert compare(torch.tensor([[0.5, torch.finfo(torch.float32).min]]), masked) is None  # the same mask, written otherwise
    assert compare(torch.tensor([[float("-inf"), 0.5]]), masked) == "values: its masked entries are elsewhere"


def test_library_messages_are_one_line_without_what_changes_between_runs():
    from atlas.model.tool_runs import library_message

    text = library_message(ValueError("bad model at 0x7f3a2b\nsee /tmp/atlas-tokenizer-abc123/tokenizer.json"))
    assert text == "ValueError: bad model at 0x… see <the tokenizer folder>"
    assert "[…]" in library_message(ValueError("Known: [" + ", ".join(f"'Arch{i}'" for i in range(40)) + "]"))


def test_a_library_message_that_prints_the_module_tree_names_the_class_and_keeps_the_reason():
    """nnterp's message on an attention-free model is the whole printed model, then its reason."""
    import torch

    from atlas.model.tool_runs import library_message

    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 1)))
    assert "\n" in repr(model)
    text = library_message(AttributeError(f"{model} has no attribute layers"))
    assert text == "AttributeError: Sequential(…) has no attribute layers"


def test_search_finds_a_value_by_a_libraries_name():
    from atlas.render.search import tool_names

    facts = {"tools": tools_of("llama")}
    assert "hook_resid_pre" in tool_names(facts, "layer_input")
    assert "layers_input" in tool_names(facts, "layer_input")
    assert "attn.hook_pattern" in tool_names(facts, "attention_probabilities")


MUTATED = r"""
import sys
from atlas.model import tools

family, mutation, out = sys.argv[1:4]
derive = tools.nnsight_access


def mutated(placement, block_list, index, seen):
    access = derive(placement, block_list, index, seen)
    if placement.value.name != "layer_output" or access.steps is None:
        return access
    if mutation == "next-block":  # the next block's output
        access.steps = [["index", index + 1] if step == ["index", "i"] else step for step in access.steps]
    else:  # the block's input instead of its output
        access.steps = [["attr", "input"] if step == ["attr", "output"] else step for step in access.steps]
    return access


tools.nnsight_access = mutated
import build
sys.exit(build.main(["--family", family, "--no-cache", "--out", out]))
"""


@pytest.mark.parametrize("mutation", ["next-block", "input"])
def test_a_mutated_nnsight_access_fails_the_build_in_one_line(tmp_path, mutation):
    result = subprocess.run([sys.executable, "-c", MUTATED, "llama", mutation, str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: atlas/families/llama.py: tools.nnsight.layer_output: "), line
    mutated = "model.model.layers[1].output" if mutation == "next-block" else "model.model.layers[i].input"
    assert mutated in line and "reads another tensor than the atlas's layer_output" in line, line
    # and says which value it did read: the next block's output, or this block's input
    assert ("it is the atlas's layer_output at block 1" if mutation == "next-block" else "it is the atlas's layer_input at block 0") in line, line
    assert not (tmp_path / "site").exists()


MUTATED_NNTERP = r"""
import sys
from atlas.model import tools

family, out = sys.argv[1:3]
tools.NNTERP["layer_output"] = [["attr", "layers_input"], ["index", "i"]]  # the block's input for its output
import build
sys.exit(build.main(["--family", family, "--no-cache", "--out", out]))
"""


def test_a_mutated_nnterp_access_to_the_residual_stream_fails_the_build_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-c", MUTATED_NNTERP, "llama", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: atlas/families/llama.py: tools.nnterp.layer_output: "), lines[0]
    assert "model.layers_input[i]" in lines[0] and "it is the atlas's layer_input at block 0" in lines[0], lines[0]
    assert not (tmp_path / "site").exists()


# --- on the built site ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(built_site):
    from tests.conftest import served

    with served(built_site) as url:
        yield url


def test_the_pages_show_each_checked_access_and_the_search_finds_the_libraries_names(browser, base, built_site):
    from tests.conftest import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(base + "llama/index.html")
        row = page.locator("#value-layer_output td.tools")
        assert "model.model.layers[i].output ✓" in row.inner_text()
        assert 'cache[f"blocks.{i}.hook_resid_post"] ✓' in row.inner_text()
        page.goto(base + "qwen3_next/index.html")  # nnterp refuses it: said once, above the tables
        assert page.locator("#support .unloaded").all_inner_texts()[0].startswith("nnterp 1.3.0 does not load this family")
        page.goto(base + "deepseek_v3/c/value.attention_premix.html")  # the bridge's head split, caught by shape
        assert "(1, 31, 8, 8)" in page.locator("#tools-transformer_lens + p").inner_text()
        assert "o_proj.input.unflatten(-1, (" in page.locator("#tools pre").first.inner_text()
        page.goto(base + "index.html")
        page.fill("#search", "hook_resid_pre")
        names = page.locator(".family-card[data-family='llama'] .names a")
        assert names.first.inner_text() == "hook_resid_pre"
        names.first.click()
        page.wait_for_url("**/llama/c/value.layer_input.html")
        assert errors == []
    finally:
        page.close()


def test_the_checks_are_kept_by_what_the_preview_run_depends_on_not_the_notes(monkeypatch):
    """A notes edit collects the family again but does not load the three libraries again: the key of the
    kept checks leaves the notes out, and follows the family's module."""
    from atlas.facts import cache
    from atlas.inputs.notes import FAMILIES

    before = cache.tools_key("gpt2")
    real = Path.read_bytes

    def edit(name):
        monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (b"\n# edited\n" if self == FAMILIES / name else b""))

    edit("gpt2.md")
    assert cache.tools_key("gpt2") == before
    edit("gpt2.py")
    assert cache.tools_key("gpt2") != before
