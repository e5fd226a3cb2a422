"""Where each config.json comes from, and every edit made to it, said on the family page and checked first."""

from __future__ import annotations

import json
import re

import pytest

from atlas import families
from atlas.inputs.checkpoint import load_pinned
from atlas.errors import AtlasError
from atlas.inputs.preflight import CONFIG_STATUSES, check_family, check_pinned
from tests.conftest import ROOT


def _pinned(name):
    return json.loads((ROOT / "atlas/checkpoints" / families.load(name).checkpoint / "checkpoint.json").read_text())


@pytest.mark.parametrize("name", families.names())
def test_every_checkpoint_says_how_close_its_config_is_to_the_released_file(name):
    source = _pinned(name)["config_source"]
    assert source["status"] in CONFIG_STATUSES and source["from"].strip()
    config = json.loads((ROOT / "atlas/checkpoints" / families.load(name).checkpoint / "config.json").read_text())
    for key in source.get("guessed", {}):
        value = config
        for part in key.split("."):
            value = value[part]  # every guessed key is a key of the file


@pytest.mark.parametrize("name", families.names())
def test_every_override_has_its_reason(name):
    family = families.load(name)
    assert set(family.override_reasons) == set(family.config_overrides)
    assert all(why.strip() for why in family.override_reasons.values())


def test_the_page_shows_the_status_the_guesses_and_the_edits(built_site):
    page = (built_site / "olmo2" / "index.html").read_text()
    source = _pinned("olmo2")["config_source"]
    assert f"config.json: {source['status']}</strong>" in page
    for key in source["guessed"]:
        assert f"<li><code>{key}</code> = " in page
    assert f"{len(source['guessed'])} of its values are guesses" in page
    deepseek = (built_site / "deepseek_v3" / "index.html").read_text()
    released = json.loads((ROOT / "atlas/checkpoints/deepseek-ai/DeepSeek-V3/config.json").read_text())
    shown = re.search(r"<code>num_nextn_predict_layers</code>: <code class=\"json\">(\d+)</code> in the file, <code class=\"json\">(\d+)</code> used", deepseek)
    assert shown and int(shown.group(1)) == released["num_nextn_predict_layers"] and shown.group(2) == "0"


def _with(pinned_changes, name="olmo2"):
    checkpoint = load_pinned(families.load(name).checkpoint)
    checkpoint.pinned.update(pinned_changes)
    return checkpoint


def test_a_guess_that_names_no_key_of_the_file_is_refused():
    checkpoint = _with({"config_source": {"status": "copy", "from": "Somewhere.", "guessed": {"rope_scaling.factorr": "typo"}}})
    with pytest.raises(AtlasError) as caught:
        check_pinned(checkpoint)
    assert str(caught.value) == ("atlas/checkpoints/allenai/OLMo-2-1124-7B/checkpoint.json: config_source.guessed['rope_scaling.factorr']: "
                                 "names no key of config.json")


def test_an_unknown_status_is_refused():
    checkpoint = _with({"config_source": {"status": "probably", "from": "somewhere"}})
    with pytest.raises(AtlasError) as caught:
        check_pinned(checkpoint)
    assert str(caught.value) == ("atlas/checkpoints/allenai/OLMo-2-1124-7B/checkpoint.json: config_source.status: must be one of "
                                 "verbatim, copy, reconstructed-partial, reconstructed, not 'probably'")


def test_an_override_without_its_reason_is_refused():
    family = families.load("llama").but(name="llama", config_overrides={"rope_theta": 10000.0})
    with pytest.raises(AtlasError) as caught:
        check_family(family)
    assert str(caught.value) == ("atlas/families/llama.py: override_reasons['rope_theta']: missing: say why config_overrides changes "
                                 "'rope_theta' (the page shows every edit with its reason)")
    stray = family.but(override_reasons={"rope_theta": "why", "vocab_size": "why"})
    with pytest.raises(AtlasError, match=r"override_reasons\['vocab_size'\]: gives a reason for a key config_overrides does not change"):
        check_family(stray)


def test_where_the_file_comes_from_is_a_sentence():
    checkpoint = _with({"config_source": {"status": "copy", "from": "a copy in some repository"}})
    with pytest.raises(AtlasError) as caught:
        check_pinned(checkpoint)
    assert str(caught.value) == ("atlas/checkpoints/allenai/OLMo-2-1124-7B/checkpoint.json: config_source.from: must say in a sentence "
                                 "(a capital first, a full stop last) where the file comes from")
