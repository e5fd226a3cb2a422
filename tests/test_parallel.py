"""Parallel collect: families collected in worker processes give the very bytes a serial build gives,
and an error raised in a worker reaches the user as the same one line."""

from __future__ import annotations

import pickle

from atlas.errors import AtlasError
from tests.conftest import ROOT, run_build, snapshot

FAMILIES = ("gpt2", "qwen3_0_6b")


def family_args(names) -> list[str]:
    return [arg for name in names for arg in ("--family", name)]


def test_a_parallel_build_is_byte_identical_to_a_serial_one(tmp_path):
    serial = run_build(ROOT, "--no-cache", "--jobs", "1", "--out", str(tmp_path / "serial"), *family_args(FAMILIES), fresh=True)
    assert serial.returncode == 0, serial.stderr
    parallel = run_build(ROOT, "--no-cache", "--jobs", "2", "--out", str(tmp_path / "parallel"), *family_args(FAMILIES))
    assert parallel.returncode == 0, parallel.stderr
    built = snapshot(tmp_path / "serial")
    assert {f"{name}/facts.json" for name in FAMILIES} <= built.keys()
    assert snapshot(tmp_path / "parallel") == built


def test_an_error_in_a_worker_is_the_same_one_line_as_in_a_serial_build(project_copy):
    # a notes block that raises: found only by collecting (the inputs' checks before it read no notes code)
    notes = project_copy / "atlas" / "families" / "qwen3_0_6b.md"
    notes.write_text(notes.read_text(encoding="utf-8") + '\n```python\nraise ValueError("broken on purpose")\n```\n',
                     encoding="utf-8")
    names = family_args(("qwen3_0_6b", "gpt2"))
    in_workers = run_build(project_copy, "--no-cache", "--jobs", "2", *names)
    serial = run_build(project_copy, "--no-cache", "--jobs", "1", *names)
    for result in (in_workers, serial):
        assert result.returncode == 1
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    assert in_workers.stderr == serial.stderr
    assert serial.stderr.startswith("error: atlas/families/qwen3_0_6b.md") and "broken on purpose" in serial.stderr
    assert not (project_copy / "site").exists()


def test_jobs_must_be_a_positive_number(tmp_path):
    for jobs in ("0", "-1", "two"):
        result = run_build(ROOT, "--jobs", jobs, "--family", "gpt2", "--out", str(tmp_path / "site"))
        assert result.returncode == 2 and "--jobs" in result.stderr
        assert not (tmp_path / "site").exists()


def test_an_atlas_error_survives_pickling_with_its_parts():
    error = AtlasError("atlas/checkpoints/x/y/config.json", "hidden_size", "is missing")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is AtlasError
    assert (again.where, again.field, again.problem) == (error.where, error.field, error.problem)
    assert str(again) == "atlas/checkpoints/x/y/config.json: hidden_size: is missing"
    no_field = pickle.loads(pickle.dumps(AtlasError("site", None, "not a folder")))
    assert no_field.field is None and str(no_field) == "site: not a folder"
