"""Collect many families: each from the facts cache where its inputs are unchanged, the rest in worker
processes, one per core unless told otherwise.

Importing torch, transformers and the families' model classes costs more than collecting a small
family, so the build imports them once, in its own process, before it starts the workers, and the
workers are forked from it: they start with every module loaded and share those pages with it. No
tensor operation has run in the parent by then (the build imports lazily and has computed nothing),
so no torch thread pool is copied half-initialized; ``spawn`` is used where fork is not available.
Every collect, serial or parallel, runs torch on one thread: the figures then never depend on the
machine's core count, and two workers do not fight over two cores with four threads. Results come back in the order the families were asked for, whatever order they finish in,
so a parallel build hands the very same facts to the rest of the pipeline as a serial one. An
``AtlasError`` raised in a worker comes back as itself; the first failing family in that order is the
one reported, as a serial build would report it, and the other workers are stopped.

What the build does next with a family's facts (check them, render its pages: ``then``) runs in the
worker that collected it, and only its result (the pages) comes back: the parent then has nothing
left to do per family but write, and the facts and the predicted layout (tens of thousands of tensors
for the largest mixtures) never cross between processes.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from atlas.facts import cache
from atlas.facts.collected import Collected
from atlas.errors import AtlasError

if TYPE_CHECKING:  # the pool is imported only when there are families to collect: a cached build skips it
    from concurrent.futures import Future, ProcessPoolExecutor

Progress = Callable[[str, str, float], None]  # (family, "collected" | "cached", seconds)
T = TypeVar("T")


def default_jobs() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform can say which cores a process may use
        return max(1, os.cpu_count() or 1)


def collect_all(names: list[str], weights: Path | None = None, *, jobs: int | None = None,
                use_cache: bool = True, progress: Progress | None = None,
                then: Callable[[Collected], Any] | None = None) -> list[Any]:
    """Every family's Collected, in the order of ``names``; with ``then``, what ``then`` makes of it,
    computed in the process that collected it (a worker) or read it from the cache (this one)."""
    report = progress or (lambda *_: None)
    finish = then or _as_collected
    results: dict[str, Any] = {}
    keys: dict[str, str] = {}
    for name in names:
        if weights is not None or not use_cache:
            continue
        start = time.perf_counter()
        keys[name] = cache.facts_key(name)
        hit = cache.load_facts(name, keys[name])
        if hit is not None:
            results[name] = finish(hit)
            report(name, "cached", time.perf_counter() - start)
    missing = [n for n in names if n not in results]
    workers = min(jobs or default_jobs(), len(missing))
    if workers <= 1:  # one family to collect (or one core): a worker process would only add its start-up
        for name in missing:
            results[name], seconds = collect_timed(name, weights, keys.get(name), finish)
            report(name, "collected", seconds)
    else:
        results.update(_in_workers(missing, weights, workers, keys, report, finish))
    return [results[n] for n in names]


def _as_collected(collected: Collected) -> Collected:
    return collected


def collect_timed(name: str, weights: Path | None, key: str | None = None,
                  then: Callable[[Collected], T] = _as_collected) -> tuple[T, float]:
    """What a worker runs: collect one family (keeping its facts in the cache under ``key``), hand them
    to ``then``, and say how long it all took."""
    import torch

    from atlas.facts.collect import collect

    torch.set_num_threads(1)
    # A layout makes a Python object for every expert of every block, and the collector, at its default
    # of every 700 new objects, would walk the whole model and transformers' modules each time: a tenth
    # of a cold build went to it. Collected every 50,000 new objects, as much garbage is freed.
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    start = time.perf_counter()
    collected = collect(name, weights)
    if key is not None:
        cache.store_facts(name, key, collected)
    return then(collected), time.perf_counter() - start


def _import_before_forking(names: list[str]) -> None:
    """Import what collecting these families will import, so that every forked worker starts with it."""
    import torch  # noqa: F401
    import transformers.modeling_utils  # noqa: F401

    import atlas.facts.collect  # noqa: F401
    import atlas.inputs.notes  # noqa: F401
    import atlas.model.preview  # noqa: F401
    import atlas.model.preview_facts  # noqa: F401
    import atlas.proof  # noqa: F401
    from atlas import families
    from atlas.inputs.checkpoint import transformers_class

    for name in names:
        try:
            family = families.load(name)
            transformers_class(family, "config_class")
            transformers_class(family, "model_class")
        except Exception:  # noqa: BLE001 - its worker raises the same error, in the order a serial build would
            pass


def _in_workers(names: list[str], weights: Path | None, workers: int, keys: dict[str, str],
                report: Progress, then: Callable[[Collected], Any]) -> dict[str, Any]:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_all_start_methods, get_context

    fork = "fork" in get_all_start_methods()
    if fork:
        _import_before_forking(names)
        gc.freeze()  # what the parent imported lives as long as the workers: their collector need not walk it
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork" if fork else "spawn"))
    # the longest first: a giant started last would keep one worker busy after the other has finished
    by_cost = sorted(names, key=_expected_cost, reverse=True)
    futures: dict[str, Future] = {n: pool.submit(collect_timed, n, weights, keys.get(n), then) for n in by_cost}
    for name, future in futures.items():  # reported as each finishes, in whatever order that is
        future.add_done_callback(lambda f, name=name: _finished(name, f, report))
    results = {}
    try:
        for name in names:  # taken in the order asked for: the first failure is a serial build's
            try:
                results[name] = futures[name].result()[0]
            except BrokenProcessPool:
                raise AtlasError(f"atlas/families/{name}.py", None,
                                 "the worker process collecting this family died (out of memory?); "
                                 "try again with --jobs 1") from None
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return results


def _expected_cost(name: str) -> int:
    """How long a family takes to collect, as a rank read from config.json alone: the blocks times the
    routed experts in each (every expert of every block is stored tensors to predict and name), which
    puts the large mixtures first."""
    from atlas.inputs.preflight import LAYERS, check_inputs
    from atlas.model.sizes import routed_experts

    try:
        _, checkpoint = check_inputs(name)
    except AtlasError:  # its worker reports the error, in the order a serial build would
        return 0
    config = checkpoint.config
    blocks = next((config[k] for k in LAYERS if isinstance(config.get(k), int)), 1)
    return blocks * (1 + (routed_experts(config) or 0))


def _finished(name: str, future: Future, report: Progress) -> None:
    if not future.cancelled() and future.exception() is None:
        report(name, "collected", future.result()[1])


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers still collecting: their results are not wanted."""
    processes = list(getattr(pool, "_processes", {}).values())  # the pool has no public way to end them (before 3.14)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)


def stderr_progress(name: str, how: str, seconds: float) -> None:
    """One line per family done, on stderr, where stderr is a terminal (or ATLAS_PROGRESS=1 asks for
    it): wherever a program reads a build's output, a failed build's error stays its only line."""
    if sys.stderr.isatty() or os.environ.get("ATLAS_PROGRESS") == "1":
        print(f"  {name:<14} {how} in {seconds:.2f} s", file=sys.stderr, flush=True)
