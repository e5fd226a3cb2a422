"""Parallel collect: families collected in worker processes give the very bytes a serial build gives,
and an error raised in a worker reaches the user as the same one line."""

from __future__ import annotations

import pickle

from atlas.errors import AtlasError
from tests.conftest import ROOT, run_build
from tests.test_cache import snapshot

FAMILIES = ("gpt2", "qwen3_0_6b")


def family_args(names) -> list[str]:
    return [arg for name in names for arg in ("--family", name)]


def test_a_parallel_build_is_byte_identical_to_a_serial_one(tmp_path):
    serial = run_build(ROOT, "--no-cache", "--jobs", "1", "--out", str(tmp_path / "serial"), *family_args(FAMILIES))
    assert serial.returncode == 0, serial.stderr
    parallel = run_build(ROOT, "--no-cache", "--jobs", "2", "--out", str(tmp_path / "parallel"), *family_args(FAMILIES))
    assert parallel.returncode == 0, parallel.stderr
    built = snapshot(tmp_path / "serial")
    assert {f"{name}/facts.json" for name in FAMILIES} <= built.keys()
    assert snapshot(tmp_path / "parallel") == built


def test_an_error_in_a_worker_is_the_same_one_line_as_in_a_serial_build(project_copy):
    module = project_copy / "atlas" / "families" / "qwen3_0_6b.py"
    module.write_text(module.read_text(encoding="utf-8") + '\nraise RuntimeError("broken on purpose")\n', encoding="utf-8")
    names = family_args(("qwen3_0_6b", "gpt2"))
    in_workers = run_build(project_copy, "--no-cache", "--jobs", "2", *names)  # the module is first imported in a worker
    serial = run_build(project_copy, "--no-cache", "--jobs", "1", *names)
    keyed = run_build(project_copy, *names)  # the cache's key reads the module in the main process
    for result in (in_workers, serial, keyed):
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert result.stderr == serial.stderr
    assert serial.stderr.splitlines()[0] == (
        "error: atlas/families/qwen3_0_6b.py: cannot be imported: RuntimeError: broken on purpose")
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
