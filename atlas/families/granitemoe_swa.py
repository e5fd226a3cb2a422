"""GraniteMoE SWA (model_type granitemoe_swa): GraniteMoE's mixture block with windowed and global attention and a learned sink per head.

Each block is GraniteMoE's: an RMSNorm, grouped-query attention, the residual add, a second RMSNorm and
a mixture of top-k routed SwiGLU experts (fused tensors), every sublayer's output multiplied by
residual_multiplier before it is added back, with Granite's embedding, attention and logit scales.
Three blocks in four see only a sliding window of recent tokens and every fourth the whole context
(config.layer_types). Every attention has one learned sink logit a head; the module's softmax runs over
the keys alone and the sink then scales each head's output by the share it leaves the keys. With
shared_intermediate_size 0, as here, every block has only its routed experts. The output head is a
separate matrix. The pinned configuration is the configuration class's defaults (see the
checkpoint's provenance).
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GraniteMoE SWA",
    vendor="IBM",
    released="2026-08",
    summary=(
        "GraniteMoE's multipliers and top-k routed SwiGLU experts with three sliding-window blocks to one "
        "global and a learned attention sink per head; the sizes are the configuration class's defaults."
    ),
    tags=("Attention sinks", "Residual scaling", "Top-k routing"),
    checkpoint="ibm-granite/granite-swash-3b-a600m",
    model_class="GraniteMoeSWAForCausalLM",
    config_class="GraniteMoeSWAConfig",
    # as in Granite SWA: the sink scales the heads' outputs after a plain softmax over the keys
    equations={"*.self_attn": {"sink_placement": "output_scale"}},
)
