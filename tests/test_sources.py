"""Pinned excerpts: located on the unwrapped object, decorators included, re-verified against the installed file."""

from __future__ import annotations

import copy
from importlib import metadata

import pytest

from atlas.facts import sources
from atlas.errors import AtlasError


def test_excerpts_of_every_class_verify(kimi):
    parts = [p for cls in kimi["excerpts"].values() for p in cls.values()]
    assert {"DeepseekV3Attention", "DeepseekV3MoE", "DeepseekV3TopkRouter", "DeepseekV3Experts"} <= set(kimi["excerpts"])
    sources.verify(parts)  # raises on any mismatch
    for p in parts:
        assert p["version"] == metadata.version("transformers") == sources.pinned_version("transformers")
        assert p["path"] in ("models/deepseek_v3/modeling_deepseek_v3.py", "activations.py")
        assert p["end"] - p["start"] + 1 == len(p["text"].splitlines())


def test_decorated_forward_includes_its_decorator_lines(kimi):
    forward = kimi["excerpts"]["DeepseekV3Attention"]["forward"]
    assert forward["text"].lstrip().startswith("@deprecate_kwarg")
    assert "def forward(" in forward["text"]


def test_excerpt_text_is_the_file_lines(kimi):
    ex = kimi["excerpts"]["DeepseekV3TopkRouter"]["forward"]
    installed = metadata.distribution("transformers").locate_file("transformers") / ex["path"]
    lines = installed.read_text().splitlines(keepends=True)
    assert "".join(lines[ex["start"] - 1 : ex["end"]]) == ex["text"]


def test_a_moved_excerpt_fails_verification(kimi):
    moved = copy.deepcopy(kimi["excerpts"]["DeepseekV3MoE"]["forward"])
    moved["start"] += 1
    with pytest.raises(AtlasError, match="no longer hash to the pinned excerpt") as caught:
        sources.verify([moved])
    assert caught.value.field == "sha256"
    assert caught.value.where.startswith("transformers/models/deepseek_v3/modeling_deepseek_v3.py:")


def test_an_excerpt_from_another_version_fails(kimi):
    other = dict(kimi["excerpts"]["DeepseekV3MoE"]["forward"], version="5.23.0")
    with pytest.raises(AtlasError, match="excerpt taken from 5.23.0, but 5.24.0 is pinned"):
        sources.verify([other])
