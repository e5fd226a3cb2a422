"""Check: every claim a page will make, tested against an independent source. A failure stops the build.

Each check raises ``AtlasError`` naming the file (or family) and the figure that disagrees.
"""

from __future__ import annotations

from typing import Any

from atlas import sources
from atlas.errors import AtlasError
from atlas.facts import Collected
from atlas.numbers import grouped


def check(collected: Collected) -> None:
    facts = collected.facts
    name = facts["family"]["name"]
    check_accounting(name, facts["accounting"])
    check_checkpoint_totals(facts["checkpoint_check"])
    if collected.local_tensors is not None:
        check_local_headers(facts["checkpoint_check"]["local"]["directory"], collected.layout, collected.local_tensors)
    sources.verify([part for parts in facts["excerpts"].values() for part in parts.values()])


# --- parameter accounting --------------------------------------------------------------------------


def check_accounting(family: str, accounting: dict[str, Any]) -> None:
    """Components add up to their module, and blocks × instances plus the rest add up to the model."""
    for row in accounting["block_kinds"]:
        _check_tree(family, row["tree"])
    model = accounting["model"]
    outside = sum(r["parameters"] + r["stored_buffers"] for r in model["rows"])
    blocks = sum(b["total"] for b in model["blocks"])
    if outside + blocks != model["total"]:
        raise AtlasError(
            family, "parameter accounting",
            f"blocks ({grouped(blocks)}) and the rest ({grouped(outside)}) add up to {grouped(outside + blocks)}, "
            f"not the model's {grouped(model['total'])}",
        )


def _check_tree(family: str, node: dict[str, Any]) -> None:
    for child in node["children"]:
        _check_tree(family, child)
    for role, key in (("parameter", "parameters"), ("buffer", "stored_buffers")):
        parts = sum(t["elements"] for t in node["tensors"] if t["role"] == role) + sum(c[key] for c in node["children"])
        if parts != node[key]:
            raise AtlasError(family, f"parameter accounting of {node['path']}", f"its components give {grouped(parts)} {key}, the module has {grouped(node[key])}")


# --- the pinned checkpoint -------------------------------------------------------------------------


def check_checkpoint_totals(check: dict[str, Any]) -> None:
    """The predicted files equal checkpoint.json on every figure it pins: tensors, tensors and bytes by
    dtype, payload, weights, index size. Figures it does not pin are listed as not checked, never passed."""
    where = check["pinned_file"]
    for row in check["figures"]:
        if not row["checked"]:
            continue
        got, want = row["predicted"], row["pinned"]
        if got != want:
            raise AtlasError(
                where, f"safetensors.{row['key']}",
                f"the checkpoint has {grouped(want)}, the model and config predict {grouped(got)} ({_signed(got - want)})",
            )


def _signed(n: int) -> str:
    return f"+{grouped(n)}" if n > 0 else grouped(n)


def check_local_headers(directory: str, layout: list, read: list) -> None:
    """A local checkpoint's headers equal the predicted layout, tensor by tensor."""
    predicted = {t.name: t for t in layout}
    found = {t.name: t for t in read}
    for t in read:
        want = predicted.get(t.name)
        if want is None:
            raise AtlasError(f"{directory}/{t.file}", t.name, "the family's layout predicts no such tensor")
        if t.dtype != want.dtype:
            raise AtlasError(f"{directory}/{t.file}", t.name, f"dtype {t.dtype}, predicted {want.dtype}")
        if tuple(t.shape) != tuple(want.shape):
            raise AtlasError(f"{directory}/{t.file}", t.name, f"shape {list(t.shape)}, predicted {list(want.shape)}")
    missing = [name for name in predicted if name not in found]
    if missing:
        more = f" and {len(missing) - 1:,} more" if len(missing) > 1 else ""
        raise AtlasError(directory, missing[0], f"predicted but in no file{more}")
