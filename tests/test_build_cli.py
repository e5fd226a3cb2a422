"""The command line as a user runs it: listing, unknown names, failing checks, atomic writes, determinism."""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

from atlas import families
from atlas.facts.collect import SCHEMA
from tests.conftest import ROOT, released_config, run_build, snapshot


def test_list_names_every_family_module():
    result = run_build(ROOT, "--list")
    assert result.returncode == 0
    modules = sorted(p.stem for p in (ROOT / "atlas" / "families").glob("*.py") if not p.name.startswith("_"))
    assert result.stdout.split() == modules == families.names()


def test_unknown_family_is_one_line_naming_the_known_ones(tmp_path):
    result = run_build(ROOT, "--family", "kimi_k3", "--out", str(tmp_path / "site"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: unknown family 'kimi_k3'; known families: {', '.join(families.names())}"
    ]
    assert not (tmp_path / "site").exists()


def test_one_expert_more_fails_the_build_and_keeps_the_previous_site(project_copy):
    site = project_copy / "site"
    first = run_build(project_copy, "--family", "kimi_k2")
    assert first.returncode == 0, first.stderr
    before = snapshot(site)

    config_path = project_copy / "atlas" / "checkpoints" / "moonshotai" / "Kimi-K2-Instruct" / "config.json"
    config = json.loads(config_path.read_text())
    config["n_routed_experts"] += 1
    config_path.write_text(json.dumps(config, indent=2))

    second = run_build(project_copy, "--family", "kimi_k2")
    assert second.returncode == 1
    [message] = second.stderr.splitlines()
    assert message.endswith("; the site in site was left as it was")
    assert message.startswith(
        "error: atlas/checkpoints/moonshotai/Kimi-K2-Instruct/checkpoint.json: safetensors.tensors: "
        "the model and config predict other figures than the checkpoint's headers: "
    )
    # One expert more, in each of the 60 MoE blocks: 3 FP8 matrices (gate, up: 2,048 × 7,168; down:
    # 7,168 × 2,048) with an F32 scale each (16 × 56 blocks of 128), one BF16 router row of 7,168 and
    # one F32 router-bias entry.
    blocks, d, f = 60, 7168, 2048
    differences = {
        "tensors": blocks * 6,
        "BF16 bytes": blocks * d * 2,
        "F32 bytes": blocks * (3 * (f // 128) * (d // 128) + 1) * 4,
        "F8_E4M3 bytes": blocks * 3 * d * f,
    }
    for figure, difference in differences.items():
        assert f"{figure} " in message and f"(+{difference:,})" in message.split(f"{figure} ", 1)[1].split(";")[0]
    assert snapshot(site) == before


def one_family_of_each_kind(site: Path) -> list[str]:
    """The fewest families that, between them, hold every kind of component and every named feature of the
    built site: a greedy cover read from each family's facts.json, so a new kind brings its family in."""
    held = {}
    for facts_file in sorted(site.glob("*/facts.json")):
        facts = json.loads(facts_file.read_text(encoding="utf-8"))
        held[facts_file.parent.name] = ({f"kind {kind}" for kind in facts["equations"]["kinds"].values()}
                                        | {f"feature {f['abbreviation']}" for f in facts["features"]})
    unmet, chosen = set().union(*held.values()), []
    while unmet:
        best = max(sorted(held), key=lambda name: len(held[name] & unmet))
        chosen.append(best)
        unmet -= held[best]
    return chosen


def test_families_collected_afresh_give_the_same_bytes_and_keep_the_others(built_site, tmp_path):
    # Collection is the part that runs torch: a family of each kind is collected again, without the cache,
    # into a copy of the whole site, which must come out byte for byte as it was (every family's pages,
    # the index and the compare pages). Rendering every family again from its facts is test_structure's.
    sample = one_family_of_each_kind(built_site)
    assert 1 < len(sample) < len(families.names())
    again = tmp_path / "again"
    shutil.copytree(built_site, again)
    result = run_build(ROOT, "--no-cache", *(arg for name in sample for arg in ("--family", name)), "--out", str(again))
    assert result.returncode == 0, result.stderr
    comparison = filecmp.dircmp(built_site, again)
    assert snapshot(again) == snapshot(built_site), comparison.report()


def test_facts_json_round_trips_and_keeps_number_arrays_on_one_line(kimi):
    from atlas.render.site import facts_json

    text = facts_json(kimi)
    assert json.loads(text) == json.loads(json.dumps(kimi))
    c = released_config("kimi_k2")
    fused = [c["n_routed_experts"], 2 * c["moe_intermediate_size"], c["hidden_size"]]
    assert f'"shape": [{",".join(map(str, fused))}]' in text  # the fused experts' shape, one line
    assert text.endswith("}\n") and text.startswith(f'{{\n "schema": {SCHEMA},')


def test_a_family_module_with_a_mistake_is_one_line_naming_it(project_copy):
    (project_copy / "atlas" / "families" / "broken.py").write_text('"""A family with a typo."""\nFAMILY = Famly(title="x")\n')
    (project_copy / "atlas" / "families" / "empty.py").write_text('"""A family that declares nothing."""\n')
    broken = run_build(project_copy, "--family", "broken")
    assert broken.returncode == 1
    assert broken.stderr.splitlines() == [
        "error: atlas/families/broken.py: cannot be imported (line 2): NameError: name 'Famly' is not defined"
        "; the site in site was left as it was"
    ]
    empty = run_build(project_copy, "--family", "empty")
    assert empty.returncode == 1
    assert empty.stderr.splitlines() == [
        "error: atlas/families/empty.py: FAMILY: missing: the module must define FAMILY = Family(...); the site in site was left as it was"
    ]
    assert not (project_copy / "site").exists()


def test_a_family_naming_a_class_transformers_lacks_is_one_line(project_copy):
    module = project_copy / "atlas" / "families" / "llama.py"
    module.write_text(module.read_text().replace('model_class="LlamaForCausalLM"', 'model_class="LlamaForCasualLM"'))
    result = run_build(project_copy, "--family", "llama")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: atlas/families/llama.py: model_class: transformers 5.24.0 has no class 'LlamaForCasualLM'"
        "; the site in site was left as it was"
    ]
