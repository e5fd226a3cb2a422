"""The two checks collect runs itself, because what it does next relies on them: a local checkpoint's
headers against the predicted layout (before its weights feed the preview run), and the preview run's
identities and shapes (before the notes run on it). The build's check stage runs check_preview again,
with the data's size, on the facts as collected or read from the cache (atlas.check.claims).
"""

from __future__ import annotations

from typing import Any

from atlas.errors import AtlasError
from atlas.numbers import grouped


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


PREVIEW_BYTES = 1_000_000  # the preview data a page embeds, at most


def check_preview(family: str, preview: dict[str, Any], data_size: bool = True) -> None:
    """Every identity holds within its tolerance; every captured value has its layout's shape at the
    tiny sizes; every value the resolver placed was captured; the data stays small (unless
    ``data_size`` is false: collecting checks the run before its notes, and the check step again after)."""
    import json

    from atlas.model.vocabulary import layout_of, resolve_dims

    for ident in preview["identities"]:
        # the residual is the evidence, not the flag: a residual over the tolerance (or NaN) fails either way
        if not ident["holds"] or not ident["max_abs_residual"] <= ident["tolerance"]:
            where = f" (blocks {ident['blocks']})" if ident["blocks"] is not None else ""
            raise AtlasError(
                family, f"identity {ident['statement']}",
                f"broken on the preview run{where}: max abs residual {ident['max_abs_residual']:.3g} exceeds the tolerance {ident['tolerance']:g}",
            )
    sizes = preview["sizes"]
    for name, by_block in preview["shapes"].items():
        layout = layout_of(name, sizes)
        if layout == "scalar":
            continue
        for block, shape in by_block.items():
            want = resolve_dims(layout, {**sizes, **preview.get("block_sizes", {}).get(block, {})})  # a block's own sizes (Gemma 4)
            if shape != want:
                raise AtlasError(family, f"shape of {name} at {'the model' if block == 'model' else 'block ' + block}",
                                 f"the preview run gave {shape}, the layout {layout} says {want}")
    if preview["uncaptured"]:
        raise AtlasError(family, "preview run", f"placed but never captured: {preview['uncaptured'][0]}")
    changed = preview["selection_changed_by_bias"]
    if changed and not any(changed.values()) and preview["weights"] is None:  # seeded runs only
        raise AtlasError(family, "preview run", "the seeded router bias changes no token's experts: the run would not show the bias at work")
    size = len(json.dumps(preview["tensors"])) if data_size else 0
    if size > PREVIEW_BYTES:
        raise AtlasError(family, "preview tensors", f"{grouped(size)} bytes of preview data, more than {grouped(PREVIEW_BYTES)}")
