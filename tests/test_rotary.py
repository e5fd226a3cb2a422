"""Rotary angles are steps of the whole model, computed from the config and compared with what the
model's rotary module returned on the preview run: the rope type, its parameters and its amplitude are
on the page, and a wrong factor fails the proof at the step that computes the angles."""

from __future__ import annotations

import json
import math

import pytest

from atlas import families
from atlas.errors import AtlasError
from tests.conftest import ROOT


def config_of(name: str) -> dict:
    config = json.loads((ROOT / "atlas/checkpoints" / families.load(name).checkpoint / "config.json").read_text())
    return config.get("text_config", config)


def model_proof(collected, name):
    return collected(name).facts["equations"]["components"]["model"]


def test_gpt_oss_shows_its_yarn_amplitude(collected):
    rope = config_of("gpt_oss")["rope_scaling"]
    amplitude = 0.1 * math.log(rope["factor"]) + 1  # YaRN's attention factor, by hand: 1.34657...
    model = model_proof(collected, "gpt_oss")
    fact = model["facts"]["rotary"]["value"]
    assert fact["rope_type"] == "yarn" and fact["factor"] == rope["factor"]
    assert fact["amplitude"] == pytest.approx(amplitude, abs=1e-6)
    shown = [s["tex"] for s in model["steps"]]
    assert any(f"{amplitude:.4f}" in tex and r"\log(32)" in tex for tex in shown), shown
    # the amplitude multiplies the cos and sin the blocks turn by, and the summary says so
    assert any(s["summary"] and r"a\cos" in s["tex"] for s in model["steps"])


@pytest.mark.parametrize("name, kind", [("llama", "llama3"), ("gpt_oss", "yarn"), ("phi4_mini", "longrope")])
def test_a_scaled_rope_is_proven_with_its_parameters(collected, name, kind):
    config = config_of(name)
    rope = config.get("rope_scaling") or config.get("rope_parameters")
    fact = model_proof(collected, name)["facts"]["rotary"]["value"]
    assert fact["rope_type"] == kind
    assert fact["rope_theta"] == config.get("rope_theta", rope.get("rope_theta"))
    for key in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "beta_fast"):
        if key in rope and key in fact:
            assert fact[key] == rope[key], key
    tex = next(s["tex"] for s in model_proof(collected, name)["steps"] if s["tex"].startswith("f_j"))
    assert f"{int(fact['rope_theta']):,}".replace(",", "{,}") in tex  # the checkpoint's base, written out
    assert f"^{{-2\\,j/{fact['rotated_dims']}}}" in tex and f"j=0..{fact['pairs'] - 1}" in tex  # over the rotated dims


def test_two_bases_are_each_proven(collected):
    """Gemma 3 turns its local blocks by one base and its global blocks by another: two ropes, each
    computed and compared, each block reading its own."""
    config = config_of("gemma3")
    facts = model_proof(collected, "gemma3")["facts"]
    assert facts["rotary_sliding_attention"]["value"]["rope_theta"] == config["rope_local_base_freq"]
    assert facts["rotary_full_attention"]["value"]["rope_theta"] == config["rope_theta"]
    shown = " ".join(s["tex"] for s in model_proof(collected, "gemma3")["steps"])
    assert r"R^{\mathrm{sliding}}_t" in shown and r"R^{\mathrm{full}}_t" in shown
    # no component takes the angles as given any more
    for c in collected("gemma3").facts["equations"]["components"].values():
        assert not any(i["given"] for i in c["inputs"] if i["argument"] == "position_embeddings")


def test_yarn_with_its_own_attention_factor_on_a_two_base_model(collected):
    facts = model_proof(collected, "olmo3")["facts"]
    rope = config_of("olmo3")["rope_scaling"]
    assert facts["rotary_full_attention"]["value"]["rope_type"] == "yarn"
    assert facts["rotary_full_attention"]["value"]["amplitude"] == pytest.approx(rope["attention_factor"], abs=1e-6)
    assert facts["rotary_sliding_attention"]["value"]["rope_type"] == "default"


@pytest.mark.parametrize("name, key", [("llama", "factor"), ("gpt_oss", "factor"), ("gemma3", "rope_theta")])
def test_a_wrong_rope_parameter_fails_the_proof_at_the_angles(monkeypatch, name, key):
    """The tiny run's rope read with one parameter doubled: the angles no longer match the module's."""
    from atlas.facts.collect import collect
    from atlas.proof import rope

    real = rope.rope_of

    def doubled(config, pairs, layer_type=None, kind_override=None):
        found = real(config, pairs, layer_type, kind_override)
        if key == "rope_theta":
            found.base *= 2
        else:
            found.params = {**found.params, key: found.params[key] * 2}
        return found

    monkeypatch.setattr(rope, "rope_of", doubled)
    with pytest.raises(AtlasError) as error:
        collect(name)
    assert "component model" in str(error.value)
    assert r"R_t=" in str(error.value) or r"R^{\mathrm{" in str(error.value)


@pytest.mark.parametrize("kind, params, expected", [
    # llama3 at base 10, 4 dims: g = (1, 10^-1/2); wavelengths 2 pi and 19.87; original length 16,
    # low 1, high 4: 2 pi < 16/4 is false, 2 pi > 16 is false -> blended with mu = (16/(2 pi) - 1)/3
    ("llama3", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
     [(1 - (16 / (2 * math.pi) - 1) / 3) / 8 + (16 / (2 * math.pi) - 1) / 3, 10 ** -0.5 / 8]),
    ("linear", {"factor": 4.0}, [0.25, 10 ** -0.5 / 4]),
])
def test_frequency_rules_by_hand(kind, params, expected):
    from atlas.proof.rope import Rope, frequencies

    f, a = frequencies(Rope(kind, 10.0, 2, 4, params, 64), 8)
    assert a == 1.0
    assert f.tolist() == pytest.approx(expected, rel=1e-12)
