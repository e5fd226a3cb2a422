"""DBRX (model_type dbrx): grouped-query attention with clipped projections and a fine-grained mixture of sixteen experts.

Each block is pre-norm, but it is split differently from Llama's: one module holds the first
LayerNorm, the attention, the first residual add and the second LayerNorm, and hands the block both
the updated residual stream and its normalised copy; the block runs the mixture on the copy and adds
the result to the stream. Every LayerNorm has a gain and no bias. The attention computes queries,
keys and values with one fused projection and clamps every entry of that projection to the interval
[-clip_qkv, clip_qkv] before the heads are split and rotated, a guard against the large activations
that destabilised training. Grouped-query attention shares each key-value head among several query
heads. In place of a dense MLP each block has a router (a bias-free linear map to one logit per
expert) and many narrow SwiGLU experts, whose weights are kept as three matrices each holding every
expert stacked along the rows. A token takes the softmax of its logits, keeps the moe_top_k largest,
and divides them by their p-norm, p being moe_normalize_expert_weights (at its default of one the
chosen weights sum to one). There is no shared expert, and the output head is not tied to the
embedding.
"""

import json
from pathlib import Path

from atlas.inputs.family import Family

# The released values the overrides below repeat at the top level, read from the pinned file itself.
_RELEASED = json.loads((Path(__file__).resolve().parent.parent / "checkpoints/databricks/dbrx-base/config.json").read_text())

TINY_CLIP = 2.0


def tiny(config) -> dict:
    """The sizes DBRX keeps in its two sub-configs, made small as the generic rule makes the top-level
    ones: the expert width, the same share of experts per token (top-2 of 8 for the checkpoint's top-4
    of 16), one key-value head for the tiny four query heads. The clip is brought down to 2 so that the
    tiny run's projections, of unit scale, pass it in a few per cent of entries: the clamp acts and its step is measured."""
    from atlas.model.tiny import TINY, TINY_TOP_K

    ffn, attn = config.ffn_config, config.attn_config
    experts = round(TINY_TOP_K * ffn.moe_num_experts / ffn.moe_top_k)
    kv_heads = max(1, TINY["num_attention_heads"] * attn.kv_n_heads // config.n_heads)

    return {
        # rope_theta: stored on the attention config (and read by the attention module) though unused there
        "attn_config": {"clip_qkv": TINY_CLIP, "kv_n_heads": kv_heads, "attn_pdrop": attn.attn_pdrop, "rope_theta": attn.rope_theta},
        "ffn_config": {
            "ffn_act_fn": dict(ffn.ffn_act_fn),
            "ffn_hidden_size": TINY["moe_intermediate_size"],
            "moe_num_experts": experts,
            "moe_top_k": TINY_TOP_K,
            "moe_jitter_eps": ffn.moe_jitter_eps,
            "moe_loss_weight": ffn.moe_loss_weight,
            "moe_normalize_expert_weights": ffn.moe_normalize_expert_weights,
        },
        "num_key_value_heads": kv_heads,
        # the width under its own name: DbrxConfig copies d_model into the expert config before the
        # generic rule's hidden_size (an alias of d_model) is applied
        "d_model": TINY["hidden_size"],
    }


FAMILY = Family(
    title="DBRX",
    vendor="Databricks",
    released="2024-03",
    summary=(
        "Grouped-query attention whose fused query-key-value projection is clamped to a fixed bound, then a "
        "fine-grained mixture of SwiGLU experts, a few per token, weighted by their softmax scores renormalised."
    ),
    tags=("Softmax top-k routing", "QKV clipping", "LayerNorm without bias"),
    checkpoint="databricks/dbrx-base",
    model_class="DbrxForCausalLM",
    config_class="DbrxConfig",
    config_overrides={
        "rope_parameters": {"rope_type": "default", "rope_theta": _RELEASED["attn_config"]["rope_theta"]},
        "num_local_experts": _RELEASED["ffn_config"]["moe_num_experts"],
        "num_experts_per_tok": _RELEASED["ffn_config"]["moe_top_k"],
    },
    override_reasons={
        "num_local_experts": (
            "a top-level copy of ffn_config's moe_num_experts, which DbrxConfig keeps and the model never reads: "
            "the atlas finds a mixture's expert count at the top level of the config, for the value layouts, the "
            "preview's share of experts and the per-token counts; the model is built from ffn_config alone"
        ),
        "num_experts_per_tok": (
            "a top-level copy of ffn_config's moe_top_k, which DbrxConfig keeps and the model never reads: the "
            "atlas reads the experts a token uses at the top level, for the active parameters, the FLOPs and the "
            "preview's share of experts; the model routes by ffn_config alone"
        ),
        "rope_parameters": (
            "the file gives the rotary base inside attn_config (its rope_theta), where transformers' DbrxConfig "
            "stores it but never reads it: the rotary embedding reads the top-level rope_parameters, which the file "
            "lacks, and would fall back to transformers' default base; the override hands the rotary embedding the "
            "file's own base"
        ),
    },
    preview=tiny,
)
