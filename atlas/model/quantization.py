"""The released quantizations' stored tensors: which model tensors a quant_method stores otherwise, and how.

One rule per quant_method config.json may name (block-wise FP8, gpt-oss's MXFP4): what it applies to,
and the tensors (values and scales, with dtypes and shapes) it stores for one model tensor.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Mapping

from atlas.errors import AtlasError
from atlas.inputs.family import StoredTensor


class _BlockFP8:
    """quant_method fp8 with weight_block_size: Linear and expert weights in F8_E4M3, F32 scales per block."""

    def __init__(self, config: Mapping[str, Any]):
        self.block = tuple(config.get("weight_block_size") or (128, 128))
        self.skip = set(config.get("modules_to_not_convert") or ["lm_head"])
        self.scale_block = self.block  # the rows × columns of the weight one F32 scale covers

    def applies(self, owner, key: str, shape: tuple[int, ...]) -> bool:
        import torch

        if len(shape) != 2 or not key.endswith(".weight") or not self.skip.isdisjoint(key.split(".")):
            return False
        # Linear layers, and fused expert tensors stored one matrix per expert.
        return isinstance(owner, torch.nn.Linear) or "Experts" in type(owner).__name__

    def tensors(self, key: str, shape: tuple[int, ...]) -> list[StoredTensor]:
        rows, cols = shape
        scales = (math.ceil(rows / self.block[0]), math.ceil(cols / self.block[1]))
        return [
            StoredTensor(key, "F8_E4M3", shape, "parameter"),
            StoredTensor(f"{key}_scale_inv", "F32", scales, "scale"),
        ]


class _MXFP4:
    """quant_method mxfp4 (gpt-oss): the routed experts' weight matrices as 4-bit values in blocks of 32.

    transformers holds an expert projection as [experts, in, out]; the files store it transposed and
    packed: ``<name>_blocks`` U8 [experts, out, in / 32, 16] (two 4-bit values a byte, 32 a block) and
    ``<name>_scales`` U8 [experts, out, in / 32] (one power-of-two exponent a block). Biases and every
    module in modules_to_not_convert keep the unquantized dtype.
    """

    BLOCK = 32  # values per block, sharing one scale
    VALUES_PER_BYTE = 2

    def __init__(self, config: Mapping[str, Any]):
        self.skip = list(config.get("modules_to_not_convert") or [])
        self.scale_block = (self.BLOCK,)  # the values of one row one U8 exponent covers

    def applies(self, owner, key: str, shape: tuple[int, ...]) -> bool:
        if owner is None or "Experts" not in type(owner).__name__ or len(shape) != 3 or key.endswith("_bias"):
            return False
        return not any(fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, pattern + ".*") for pattern in self.skip)

    def tensors(self, key: str, shape: tuple[int, ...]) -> list[StoredTensor]:
        experts, inputs, outputs = shape
        if inputs % self.BLOCK:
            raise AtlasError("config.json", "quantization_config", f"{key}: {inputs} inputs do not split into MXFP4 blocks of {self.BLOCK}")
        blocks = inputs // self.BLOCK
        return [
            StoredTensor(f"{key}_blocks", "U8", (experts, outputs, blocks, self.BLOCK // self.VALUES_PER_BYTE), "parameter", self.VALUES_PER_BYTE),
            StoredTensor(f"{key}_scales", "U8", (experts, outputs, blocks), "scale"),
        ]


QUANTIZERS = {"fp8": _BlockFP8, "mxfp4": _MXFP4}


def quantizer(config: Mapping[str, Any] | None):
    if not config:
        return None
    method = config.get("quant_method")
    if method not in QUANTIZERS:
        raise AtlasError("config.json", "quantization_config.quant_method", f"{method!r} has no layout rule (known: {', '.join(QUANTIZERS)})")
    return QUANTIZERS[method](config)
