"""config.json in words: how the released weights are stored. The dtype they were saved in, the
quantization format (FP8 blocks, MXFP4) and DeepSeek-V4's 4-bit experts.
"""

from __future__ import annotations

from atlas.model.config_words.registry import _settings, explains
from atlas.numbers import grouped


@explains("torch_dtype", "dtype")
def _dtype(key, v, c):
    words = f"The weights were saved as {c.text(key)}"
    if c.raw.get("quantization_config"):
        words += ", where quantization_config does not store them otherwise"
    return words


@explains("quantization_config")
def _quantization(key, v, c):
    if not isinstance(v, dict):
        c.fail("quantization_config", "must be an object naming its quant_method")
    method = v.get("quant_method")
    if not isinstance(method, str):
        c.fail("quantization_config.quant_method", "missing: the format of the stored weights is unknown")
    if method == "fp8":
        block = v.get("weight_block_size")
        scales = (f"one scale per {' × '.join(grouped(c.count('quantization_config.weight_block_size', b)) for b in block)} block"
                  if isinstance(block, list) and block else "scales as the settings give them")
        words = f"The released files store the weights as 8-bit floats ({v.get('fmt', 'fp8')}) with {scales}"
    elif method == "mxfp4":
        from atlas.model.quantization import QUANTIZERS

        words = (f"The released files store the weights as MXFP4: 4-bit values in blocks of {QUANTIZERS['mxfp4'].BLOCK}, "
                 "each block sharing one power-of-two scale")
        skipped = v.get("modules_to_not_convert")
        if skipped:
            words += f", except {', '.join(skipped)}, kept unquantized"
    else:
        words = f'The released files store the weights in the format "{method}", which the atlas has no words for'
    others = _settings(v, skip=("quant_method", "weight_block_size", "fmt", "modules_to_not_convert"))
    return words + f' (quant_method "{method}"' + (f"; {others})" if others else ")")


@explains("expert_dtype")
def _expert_dtype(key, v, c):
    kind = c.text("expert_dtype")
    words = f'The routed experts\' weights are stored as "{kind}"'
    if kind == "fp4":
        words += ", 4-bit floats, not in the 8-bit format quantization_config names for the other matrices"
    return words
