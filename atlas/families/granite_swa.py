"""Granite SWA (model_type granite_swa): Granite's dense block with windowed and global attention and a learned sink per head.

Each block is pre-norm: an RMSNorm, grouped-query attention, the residual add, a second RMSNorm and a
SwiGLU MLP, every sublayer's output multiplied by residual_multiplier before it is added back; the
embeddings are multiplied by embedding_multiplier, the attention scores by attention_multiplier, and
the logits divided by logits_scaling, as in Granite. Three blocks in four see only a sliding window of
recent tokens and every fourth sees the whole context (config.layer_types). Every attention has one
learned sink logit a head that joins the softmax's denominator and takes no value, so a head may give
part of its weight to no token. Each layer may have its own rotary base (layer_rope_theta, 0 for a
layer without positions). The output head is the embedding. The pinned configuration is the
configuration class's defaults (see the checkpoint's provenance).
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Granite SWA",
    vendor="IBM",
    released="2026-08",
    summary=(
        "Granite's dense block and multipliers with three sliding-window blocks to one global, a learned "
        "attention sink per head and a tied head; the sizes are the configuration class's defaults."
    ),
    tags=("Attention sinks", "Residual scaling", "Dense"),
    checkpoint="ibm-granite/granite-swash-2b",
    model_class="GraniteSWAForCausalLM",
    config_class="GraniteSWAConfig",
    # the module's softmax runs over the keys alone and the sink then scales the heads' outputs (its
    # eager attention's log-sum-exp scaling): the same values as a sink column in the softmax, but the
    # probabilities the module returns are the plain ones, so the steps follow the module
    equations={"*.self_attn": {"sink_placement": "output_scale"}},
)
