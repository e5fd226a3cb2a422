#!/usr/bin/env python3
"""How long the strict safetensors reader takes on Kimi K2's number of tensors, 139,644.

    python benchmarks/read_headers.py            # one file of 139,644 names, and the same split into 64 shards
    python benchmarks/read_headers.py --names N  # another count

The files are made here in a temporary folder, in the safetensors format (8-byte length, JSON header,
data buffer), with names shaped like the real ones (model.layers.N.mlp.experts.E.gate_proj.weight),
one BF16 element each, so that the data buffers stay a few hundred kilobytes. Each read is timed in
this process, best of three, both by the clock and by the CPU time the process used (on a machine
shared with other work the clock counts their turns too; the CPU time does not); the reader's second
read of an unchanged folder (as a build with --weights asks for it twice) is timed apart. The target:
a single header of 139,644 names in under 2 s of CPU on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atlas.inputs import safetensors_headers  # noqa: E402

KIMI_K2_TENSORS = 139_644
TARGET_SECONDS = 2.0


def names(count: int) -> list[str]:
    return [f"model.layers.{i // 1536}.mlp.experts.{(i // 3) % 512}.{('gate', 'up', 'down')[i % 3]}_proj.weight" for i in range(count)]


def write_file(path: Path, tensor_names: list[str]) -> None:
    header = {"__metadata__": {"format": "pt"}}
    for i, name in enumerate(tensor_names):
        header[name] = {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(2 * len(tensor_names)))


def best_of(runs: int, work) -> tuple[float, float]:
    """The shortest of ``runs`` runs, by the clock and by CPU time (seconds)."""
    clock, cpu = [], []
    for _ in range(runs):
        safetensors_headers._last_read = None  # each run reads the files afresh
        start, start_cpu = time.perf_counter(), time.process_time()
        work()
        clock.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(clock), min(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=KIMI_K2_TENSORS)
    args = parser.parse_args()
    every = names(args.names)
    with tempfile.TemporaryDirectory() as d:
        single, sharded = Path(d) / "single", Path(d) / "sharded"
        single.mkdir()
        sharded.mkdir()
        write_file(single / "model.safetensors", every)
        shards, weight_map = 64, {}
        for s in range(shards):
            shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = every[s::shards]
            write_file(sharded / shard, part)
            weight_map.update(dict.fromkeys(part, shard))
        (sharded / safetensors_headers.INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": 2 * len(every)}, "weight_map": weight_map}))
        one = best_of(3, lambda: safetensors_headers.read_file(single / "model.safetensors"))
        split = best_of(3, lambda: safetensors_headers.read_checkpoint(sharded))
        safetensors_headers.read_checkpoint(sharded)
        start = time.perf_counter()
        safetensors_headers.read_checkpoint(sharded)
        again = time.perf_counter() - start
    print(f"{args.names:,} names in one header: {one[0]:.2f} s, {one[1]:.2f} s of CPU (target: under {TARGET_SECONDS:.0f} s of CPU)")
    print(f"{args.names:,} names in {shards} shards with their index: {split[0]:.2f} s, {split[1]:.2f} s of CPU")
    print(f"the same folder read again, unchanged: {again * 1000:.1f} ms")
    return 0 if one[1] < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
