"""DeepSeek-V3 (model_type deepseek_v3): multi-head latent attention and a sigmoid-routed mixture of experts.

Every block reads the residual stream through an RMSNorm twice: once for multi-head latent attention
(MLA), whose queries and keys are expanded from small low-rank latents and carry a separate rotary
part shared across heads, and once for the feed-forward sublayer. The first first_k_dense_replace
blocks use a dense SwiGLU MLP; every later block uses a mixture of routed experts chosen by a
sigmoid router with a selection bias, plus shared experts that every token passes through.

The released checkpoint also stores a multi-token-prediction (MTP) block after the last layer;
transformers never builds it, so the atlas counts it only where it checks the files.
"""

from __future__ import annotations

from typing import Any, Mapping

from atlas.inputs.family import Family, StoredTensor


def multi_token_prediction_tensors(raw: Mapping[str, Any], layout) -> list[StoredTensor]:
    """The MTP block(s) the checkpoint files store after the last decoder layer.

    Each is a full decoder block (laid out exactly like the model's own later blocks) plus the MTP
    glue: two RMSNorms (enorm, hnorm), the projection eh_proj from the concatenated pair back to the
    width, and the block's own embedding and output head. The glue is stored unquantized.
    """
    extra_blocks = raw.get("num_nextn_predict_layers") or 0
    if not extra_blocks:
        return []
    first = raw["num_hidden_layers"]
    width, vocab = raw["hidden_size"], raw["vocab_size"]
    tensors = []
    for index in range(first, first + extra_blocks):
        prefix = f"model.layers.{index}."
        tensors += [t for t in layout.under(prefix, num_hidden_layers=first + extra_blocks) if t.name.startswith(prefix)]
        glue = {
            "enorm.weight": (width,),
            "hnorm.weight": (width,),
            "eh_proj.weight": (width, 2 * width),
            "shared_head.norm.weight": (width,),
            "shared_head.head.weight": (vocab, width),
            "embed_tokens.weight": (vocab, width),
        }
        tensors += [StoredTensor(prefix + name, layout.weight_dtype, shape, "parameter") for name, shape in glue.items()]
    return tensors


FAMILY = Family(
    title="DeepSeek-V3",
    vendor="DeepSeek",
    released="2024-12",
    summary=(
        "Multi-head latent attention with a shared rotary key, then a mixture of routed experts with "
        "sigmoid scores and a shared expert, after a few dense blocks."
    ),
    tags=("Latent attention", "Shared expert", "Dense first blocks"),
    checkpoint="deepseek-ai/DeepSeek-V3",
    model_class="DeepseekV3ForCausalLM",
    config_class="DeepseekV3Config",
    config_overrides={"num_nextn_predict_layers": 0},
    override_reasons={"num_nextn_predict_layers": (
        "transformers builds no multi-token-prediction block, so the model is built without one; the block's "
        "tensors, which the released files do hold, are added back to the checkpoint check (stored_extras)."
    )},
    stored_extras=multi_token_prediction_tensors,
)
