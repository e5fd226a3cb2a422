"""The predicted layout, converted back one kind of block at a time, against transformers' own reverse
conversion of the whole model in one call (what save_pretrained runs): the same stored tensors, in
the same order, for the families whose files rename, split or quantize tensors."""

from __future__ import annotations

import pytest

from atlas.model import checkpoint_layout
from atlas.inputs.checkpoint import build_on_meta, transformers_config
from atlas.facts.collect import _stored_rules
from atlas.inputs.preflight import check_inputs


def saved_names(name: str):
    family, checkpoint = check_inputs(name)
    model = build_on_meta(family, transformers_config(family, checkpoint), checkpoint.config_path)
    rules = _stored_rules(checkpoint)
    weight_dtype = checkpoint_layout.LayoutPredictor(checkpoint.config, lambda _: model, rules).weight_dtype
    unique, _ = checkpoint_layout._unique_state(model, rules)
    return (lambda: checkpoint_layout._SavedNames(model, checkpoint.config.get("quantization_config"), weight_dtype, rules)), unique


def whole_model(saved, unique):
    """transformers' revert_weight_conversion over every tensor at once, then the same quantization."""
    return [t for t, _ in saved._stored(unique)]


def counting_reverts(saved, monkeypatch) -> list[list[str]]:
    """The names handed to each conversion back, call by call."""
    calls = []
    revert = saved.revert
    monkeypatch.setattr(saved, "revert", lambda tensors: calls.append(list(tensors)) or revert(tensors))
    return calls


# kimi_k2: FP8 with scales, stacked experts stored one per expert, one dense block then 60 mixtures;
# minimax_m2: the files rename the expert modules (owners found by converting each module back);
# deepseek_v4: four kinds of block; qwen3_next: linear and full attention blocks; longcat_flash: two
# attention and two MLP sublayers in each block.
@pytest.mark.parametrize("name", ["kimi_k2", "minimax_m2", "deepseek_v4", "qwen3_next", "longcat_flash"])
def test_block_by_block_stores_what_the_whole_model_conversion_stores(name, monkeypatch):
    made, unique = saved_names(name)
    saved = made()
    calls = counting_reverts(saved, monkeypatch)
    by_block = [t for t, _ in saved.tensors(unique)]
    assert by_block == whole_model(made(), unique)
    blocks = {key.split(".")[2] for key in unique if key.startswith("model.layers.")}
    converted = {key.split(".")[2] for names in calls for key in names if key.startswith("model.layers.")}
    # two blocks of each kind are converted (the first, and the second as the check), not every block
    assert len(converted) <= 2 * 4 < len(blocks)
    assert all(saved._alike.values())


def test_a_conversion_that_names_one_block_converts_every_block(monkeypatch):
    from transformers.core_model_loading import WeightRenaming

    made, unique = saved_names("mixtral")
    saved = made()
    saved.conversions = [*saved.conversions, WeightRenaming("model.layers.3.self_attn.out", "model.layers.3.self_attn.o_proj")]
    calls = counting_reverts(saved, monkeypatch)
    names = [t.name for t, _ in saved.tensors(unique)]
    assert [len(names) for names in calls] == [len(unique)]  # one call, over the whole model
    assert "model.layers.3.self_attn.out.weight" in names and "model.layers.4.self_attn.o_proj.weight" in names


def test_a_block_stored_unlike_the_first_of_its_kind_is_never_copied(monkeypatch):
    made, unique = saved_names("mixtral")
    saved = made()
    stored = saved._stored

    def second_block_differs(tensors):  # as if a conversion acted on block 1 alone, whatever its patterns said
        out = stored(tensors)
        return [(t.renamed(t.name + "_b1"), q) for t, q in out] if any(".layers.1." in k for k in tensors) else out

    monkeypatch.setattr(saved, "_stored", second_block_differs)
    names = [t.name for t, _ in saved.tensors(unique)]
    assert not any(saved._alike.values())
    assert "model.layers.5.block_sparse_moe.experts.0.w1.weight" in names  # block 5 converted itself, not copied from 1
    assert "model.layers.1.block_sparse_moe.experts.0.w1.weight_b1" in names
