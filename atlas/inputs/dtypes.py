"""The safetensors dtypes: bytes per element, and the dtype config.json's torch_dtype stores weights in.

Plain data, shared by the header readers (``atlas.inputs.safetensors_headers``, ``atlas.inputs.pin``),
the input checks and the predicted checkpoint layout (``atlas.model.checkpoint_layout``).
"""

# Bytes per element of each safetensors dtype the atlas may predict or read.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}

# config.json's torch_dtype / dtype -> the safetensors dtype the unquantized weights are stored in.
TORCH_TO_SAFETENSORS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", None: "F32"}
