"""The weights in memory: as the checkpoint stores them, and in BF16, FP8 with 128 × 128 block scales and
4-bit with a scale per 32 values; the quantized formats' bytes per matrix, checked against the matrices
(with their scales) a quantized checkpoint's predicted layout stores.
"""

from __future__ import annotations

import math
from typing import Any

from atlas.numbers import grouped
from atlas.cost.coefficients import expert_count, experts_module

FP8_BLOCK = 128  # one F32 scale per 128 × 128 block of a matrix (DeepSeek-V3's FP8 layout)
FOUR_BIT_GROUP = 32  # one 8-bit power-of-two scale per 32 values (MXFP4, as gpt-oss stores its experts)


def weight_figures(model, blocks, facts: dict[str, Any], layout: list) -> list[dict[str, Any]]:
    """The weights in memory: as the checkpoint stores them, and in BF16, FP8 and 4-bit alternatives."""
    from atlas.model.roles import block_roles

    predicted = facts["checkpoint_check"]["predicted"]
    total = facts["accounting"]["model"]["total"]
    seen: set[int] = set()  # a tensor several blocks hold (Zamba2's shared blocks) is one matrix in memory
    quantizable = [m for b in blocks for m in _quantizable(b, block_roles(b), seen)]
    q_values = sum(math.prod(shape) * n for shape, n in quantizable)
    rest = total - q_values
    fp8 = sum(fp8_matrix_bytes(shape) * n for shape, n in quantizable)
    four = sum(four_bit_matrix_bytes(shape) * n for shape, n in quantizable)
    fp8_scales = fp8 - q_values
    four_scales = four - math.ceil(q_values / 2)
    stored = " + ".join(f"{dtype} {grouped(b)}" for dtype, b in predicted["bytes_by_dtype"].items())
    return [
        {"name": "as the checkpoint stores them", "bytes": predicted["payload_bytes"],
         "formula": f"{stored} bytes", "check": "the predicted files' bytes by dtype, checked against the pinned headers where they are pinned"},
        {"name": "BF16", "bytes": 2 * total, "formula": f"{grouped(total)} values × 2 bytes",
         "check": "the weight parameters, checked against the checkpoint's headers"},
        {"name": "FP8, 128 × 128 block scales", "bytes": fp8 + 2 * rest,
         "formula": f"{grouped(q_values)} block-matrix values × 1 byte + {grouped(fp8_scales)} bytes of F32 scales (one per 128 × 128 block) "
                    f"+ {grouped(rest)} other values (embeddings, head, norms, biases, routers) × 2 bytes",
         "check": _scale_check(layout, "F8_E4M3")},
        {"name": "4-bit, a scale per 32 values", "bytes": four + 2 * rest,
         "formula": f"{grouped(q_values)} block-matrix values × ½ byte + {grouped(four_scales)} bytes of 8-bit scales (one per 32 values) "
                    f"+ {grouped(rest)} other values × 2 bytes",
         "check": _scale_check(layout, "U8")},
    ]



def _quantizable(block, roles, seen: set[int]) -> list[tuple[tuple[int, ...], int]]:
    """The matrices of a block an FP8 or 4-bit checkpoint would quantize: every matrix but the router's,
    as (matrix shape, how many such matrices); none already in ``seen`` (the ids of those counted before)."""
    mlp = block.get_submodule(roles.mlp) if roles.mlp else None
    router = getattr(mlp, roles.router) if mlp is not None and roles.router else None
    router_ids = {id(p) for p in router.parameters()} if router is not None else set()
    experts = experts_module(block, roles)
    n_experts = expert_count(experts) if experts is not None else None
    found = []
    for module in block.modules():
        for _, p in module.named_parameters(recurse=False):
            if id(p) in router_ids or id(p) in seen:
                continue
            seen.add(id(p))
            if "Experts" in type(module).__name__ and p.dim() >= 3 and p.shape[0] == n_experts:
                found.append((tuple(p.shape[1:]), n_experts))
            elif p.dim() >= 2:
                found.append((tuple(p.shape), 1))
    return found



def fp8_matrix_bytes(shape: tuple[int, ...]) -> int:
    """A matrix in F8_E4M3 with one F32 scale per FP8_BLOCK × FP8_BLOCK block (edge blocks partial)."""
    rows, cols = shape[0], math.prod(shape[1:])
    return rows * cols + 4 * math.ceil(rows / FP8_BLOCK) * math.ceil(cols / FP8_BLOCK)



def four_bit_matrix_bytes(shape: tuple[int, ...]) -> int:
    """A matrix at 4 bits a value with one 8-bit scale per FOUR_BIT_GROUP values of a row."""
    values = math.prod(shape)
    return math.ceil(values / 2) + math.ceil(values / FOUR_BIT_GROUP)



def stored_pairs(layout: list, dtype: str) -> list[tuple[Any, Any]]:
    """(quantized tensor, its scale) of a predicted layout: FP8 weights with their ``_scale_inv``, or
    MXFP4's ``_blocks`` with their ``_scales``."""
    if _last_pairs[0] is not layout:  # the cost's words and the check each ask of the same layout, per dtype
        _last_pairs[:] = [layout, _pairs_of(layout)]
    return _last_pairs[1].get(dtype, [])



_last_pairs: list[Any] = [None, None]


def _pairs_of(layout: list) -> dict[str, list[tuple[Any, Any]]]:
    """The pairs of every dtype, in one pass over the layout (a large one holds a hundred thousand tensors)."""
    by_name = {t.name: t for t in layout if t.role == "scale"}  # the predicted layout gives every scale this role
    pairs: dict[str, list[tuple[Any, Any]]] = {}
    if not by_name:
        return pairs
    for t in layout:
        if t.role != "parameter":
            continue
        if t.dtype == "F8_E4M3" and f"{t.name}_scale_inv" in by_name:
            pairs.setdefault(t.dtype, []).append((t, by_name[f"{t.name}_scale_inv"]))
        elif t.name.endswith("_blocks") and t.name[: -len("_blocks")] + "_scales" in by_name:
            pairs.setdefault(t.dtype, []).append((t, by_name[t.name[: -len("_blocks")] + "_scales"]))
    return pairs



def _scale_check(layout: list, dtype: str) -> str:
    pairs = stored_pairs(layout, dtype)
    if not pairs:
        return "the checkpoint stores no matrix this way, so the formula is not checked against its files"
    return (f"the same formula gives the bytes the checkpoint's files store for each of its {grouped(len(pairs))} "
            "quantized matrices with their scales (checked)")



def scale_mismatches(layout: list) -> list[str]:
    """Quantized matrices of the predicted layout whose stored bytes (values and scales) differ from the
    formulas' bytes for a matrix of that shape."""
    from atlas.inputs.dtypes import DTYPE_BYTES

    wrong = []
    for t, scale in stored_pairs(layout, "F8_E4M3"):
        stored = t.elements * DTYPE_BYTES[t.dtype] + scale.elements * DTYPE_BYTES[scale.dtype]
        if fp8_matrix_bytes(tuple(t.shape)) != stored:
            wrong.append(f"{t.name}: {grouped(stored)} bytes stored, the FP8 formula gives {grouped(fp8_matrix_bytes(tuple(t.shape)))}")
    for t, scale in stored_pairs(layout, "U8"):
        stored = t.elements * DTYPE_BYTES[t.dtype] + scale.elements * DTYPE_BYTES[scale.dtype]
        formula = four_bit_matrix_bytes((t.values,))
        if formula != stored:
            wrong.append(f"{t.name}: {grouped(stored)} bytes stored, the 4-bit formula gives {grouped(formula)}")
    return wrong
