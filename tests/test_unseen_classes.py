"""A family of a transformers class the atlas has never met, as a new user adds one: one module, one notes
file, one checkpoint folder. Where the atlas cannot place or prove what the class computes, the build
stops with one line that says what it could not do, never an internal error, and keeps the site.

The configs are made up (small sizes of each class's own defaults), written as the user would write the
checkpoint folder; each class reaches a different place the atlas stops at.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import copy_project, run_build, snapshot

CASES = {
    # GPT-Neo's attention_types must cover num_layers: the generic tiny rule changes one and not the other
    "gpt_neo": ("GPTNeoForCausalLM", "GPTNeoConfig",
                dict(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]]),
                ["atlas/families/gpt_neo.py: preview", "GPTNeoConfig", "attention_types"]),
    # MPT keeps its head count as n_heads on the attention itself, and no config: read, then proven or not
    "mpt": ("MptForCausalLM", "MptConfig", dict(vocab_size=1000, d_model=64, n_layers=2, n_heads=4), ["mpt"]),
    # DiffLlama's differential attention reads each value head twice as wide, two heads joined, for its two softmaxes:
    # the values the atlas reads are not those a field tool's standard access finds, and the build says which access
    "diffllama": ("DiffLlamaForCausalLM", "DiffLlamaConfig",
                  dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128),
                  ["diffllama", "tools.nnsight.attention_values", "the access is wrong"]),
    # xLSTM keeps its blocks in no ModuleList of num_hidden_layers modules
    "xlstm": ("xLSTMForCausalLM", "xLSTMConfig", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_heads=4),
              ["xLSTMForCausalLM", "ModuleList"]),
}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project copy with a site built in it: the site every stopped build must keep."""
    root = copy_project(tmp_path_factory.mktemp("unseen"))
    result = run_build(root, "--family", "gpt2", "--out", "site")
    assert result.returncode == 0, result.stderr
    return root


def add_family(root, name: str, model_class: str, config_class: str, sizes: dict) -> None:
    import transformers

    config = getattr(transformers, config_class)(**sizes).to_dict()
    config = {k: v for k, v in config.items()
              if not k.startswith("_") and k not in ("transformers_version", "dtype", "torch_dtype", "id2label", "label2id")}
    config.update(architectures=[model_class], torch_dtype="float32")
    folder = root / "atlas/checkpoints/made-up" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "checkpoint.json").write_text(json.dumps({
        "repo": f"made-up/{name}", "revision": "unpinned", "safetensors": {}, "stored_buffers": [],
        "provenance": "A made-up configuration: small sizes of the class's own defaults."}))
    (root / f"atlas/families/{name}.py").write_text(
        '"""A made-up family of a class the atlas has not met."""\n\nfrom atlas.inputs.family import Family\n\n'
        f'FAMILY = Family(title="{name}", vendor="Nobody", released="2025-01", summary="A made-up family.", '
        f'tags=("Dense",), checkpoint="made-up/{name}", model_class="{model_class}", config_class="{config_class}")\n')
    (root / f"atlas/families/{name}.md").write_text("# Notes\n\nNone yet.\n")


@pytest.mark.parametrize("name", list(CASES))
def test_a_class_the_atlas_has_not_met_stops_in_one_line(project, name):
    model_class, config_class, sizes, named = CASES[name]
    add_family(project, name, model_class, config_class, sizes)
    before = snapshot(project / "site")
    result = run_build(project, "--family", name, "--out", "site")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr, lines[0]
    for words in named:
        assert words in lines[0], (words, lines[0])
    assert lines[0].endswith("the site in site was left as it was"), lines[0]
    assert snapshot(project / "site") == before
