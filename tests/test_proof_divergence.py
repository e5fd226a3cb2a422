"""A wrong step fails the proof naming that step: every compared value is checked in the order the
steps ran, the first that differs names its step (and the steps since the last agreeing value, where
none of them had a value of the run to compare), and where no variant of a choice reproduces the
module, the variant that got furthest is the one reported, with each variant's first divergence.

Each test changes one step's arithmetic in-process (its TeX unchanged) and runs the family's proof."""

from __future__ import annotations

import importlib

import pytest

from atlas.errors import AtlasError


def mutate(monkeypatch, module: str, marker: str, change):
    """Every step built in ``module`` whose TeX holds ``marker`` computes ``change(e, original_fn)``
    instead; returns the TeX of the steps changed."""
    where = importlib.import_module(module)
    real = where.Step
    changed = []

    def step(*args, **kwargs):
        made = real(*args, **kwargs)  # a step typed as TeX beside its function, or printed from an expression
        if marker in made.tex and made.fn is not None:
            original = made.fn
            made.fn = lambda e, original=original: change(e, original)
            changed.append(made.tex)
        return made

    monkeypatch.setattr(where, "Step", step)
    return changed


def proof_error(name: str) -> str:
    from atlas.facts.collect import collect

    with pytest.raises(AtlasError) as error:
        collect(name)
    return str(error.value)


def test_a_dropped_sink_is_named_at_the_softmax_with_sinks(monkeypatch):
    changed = mutate(monkeypatch, "atlas.proof.scores", "learned sink", lambda e, fn: e["S"].softmax(-1))
    error = proof_error("gpt_oss")
    assert changed and f"step `{changed[0]}` does not reproduce" in error
    assert "self_attn:" in error and "RoPE" not in error.split("does not reproduce")[0]
    # no rotary layout reproduces the attention now: the line names where each one first diverged, and the
    # layout kept is the one that gets as far as the sinks
    assert "rotary_layout: no variant reproduces the module: " in error
    assert f"halves_angle_per_pair first diverges at `{changed[0]}`" in error


def test_a_dropped_temperature_is_named_at_the_temperature(monkeypatch):
    """Llama 4's blocks without positions scale their queries by a temperature; left out, the
    failure names that step, not a rotation of the blocks that turn no angles."""
    changed = mutate(monkeypatch, "atlas.proof.attention", "the query temperature", lambda e, fn: e["Q"])
    error = proof_error("llama4")
    assert changed and f"step `{changed[0]}` does not reproduce" in error
    assert "no_position" in error.split(": step")[0]


@pytest.mark.parametrize("name, marker, state", [
    ("jamba", r"D^{j}c^{j}_t", "c"),  # the first Mamba: D times the convolved input
    ("nemotron_h", r"D^{h}x^{h}_t", None),  # Mamba-2: D times each head's input
])
def test_a_dropped_d_is_named_at_the_scan(monkeypatch, name, marker, state):
    def without_d(e, fn):
        y = fn(e)
        if state:  # (batch, positions, channels): the skip term D x taken back out
            return y - e.w("D") * e[state]
        b, t = e["xs"].shape[:2]
        heads = e.w("D").shape[0]
        x = e["xs"].reshape(b, t, heads, -1)
        return y - (e.w("D")[None, None, :, None] * x).reshape(b, t, -1)

    changed = mutate(monkeypatch, "atlas.proof.ssm", marker, without_d)
    error = proof_error(name)
    assert changed and f"`{changed[0]}`" in error  # the scan is named, by itself or among the steps not compared
    if not state:  # Mamba-2's scan output is a value of the run: the scan alone is named
        assert f"step `{changed[0]}` does not reproduce" in error


def test_removed_clamps_are_named(monkeypatch):
    """gpt-oss clamps its experts' gate and up projections; the preview's bound is one its values
    reach, so without the clamps the experts no longer reproduce, and the error names the clamp."""
    # the up projection's clamp (u <- clamp(u, -limit, limit)) left out: the step returns u as it was
    changed = mutate(monkeypatch, "atlas.proof.experts", r"\operatorname{clamp}", lambda e, fn: e["u"])
    error = proof_error("gpt_oss")
    assert changed and f"`{changed[0]}`" in error
    assert error.split(": step")[0].endswith("mlp.experts")


def test_the_clamp_is_measured_not_assumed(collected):
    """With the clamp acting on the run, the clamped experts are the only variant that reproduces."""
    experts = [c for pid, c in collected("gpt_oss").facts["equations"]["components"].items() if pid.endswith("mlp.experts")]
    assert experts
    for c in experts:
        assert c["facts"]["experts"]["value"] == "clamped_interleaved"
        assert c["facts"]["experts"]["how"].startswith("measured: the only variant that reproduces")
        assert "not_exercised" not in c["facts"]
