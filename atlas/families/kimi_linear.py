"""Kimi Linear (model_type kimi_linear): Kimi delta attention in most blocks, latent attention without positions in the rest, and a sigmoid-routed mixture.

Most blocks mix tokens with Kimi delta attention (KDA), a gated delta rule whose decay is not one
number per head but one per key channel: separate query, key and value projections pass a short
causal depthwise convolution; a low-rank forget-gate projection gives each head's channels their own
decay, a projection gives each head a write strength, and each head keeps one key × value matrix that
decays channel by channel, is corrected towards each new value along its key (the delta rule), and is
read with the query. The read-out is RMS-normalized per head and gated by the sigmoid of a second
low-rank projection before the output projection.

The other blocks, listed in the config's linear_attn_config.full_attn_layers, use multi-head latent
attention (keys and values rebuilt from a compressed latent) with no rotary angles at all: the delta
rule's order-dependent state is what tells positions apart.

After the first dense block, the feed-forward part is a mixture of routed experts chosen by sigmoid
scores with a selection bias, renormalized and scaled, plus a shared expert.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY_LINEAR_HEAD_DIM, TINY_LINEAR_KEY_HEADS, tiny_values


def tiny(config):
    """The preview: the first blocks up to and including the first full-attention one (the dense
    first block, delta-attention blocks, a latent-attention block: every kind), and the linear sizes
    also in linear_attn_config, which KimiLinearConfig reads them from again when it is built."""
    layers = config.layer_types.index("full_attention") + 1
    # the generic rule's expert counts under the names config.json uses (KimiLinearConfig maps
    # num_local_experts to num_experts and num_experts_per_tok to num_experts_per_token; the file's
    # own names would otherwise win when the tiny config is built)
    aliases = type(config).attribute_map
    renamed = {aliases[k]: v for k, v in tiny_values(config).items() if k in aliases}
    return {
        **renamed,
        "num_hidden_layers": layers,
        "layer_types": list(config.layer_types[:layers]),
        "mlp_layer_types": list(config.mlp_layer_types[:layers]),
        "linear_attn_config": {**config.linear_attn_config, "num_heads": TINY_LINEAR_KEY_HEADS, "head_dim": TINY_LINEAR_HEAD_DIM,
                               "full_attn_layers": [], "kda_layers": []},
    }

FAMILY = Family(
    title="Kimi Linear",
    vendor="Moonshot AI",
    released="2025-10",
    summary=(
        "Kimi delta attention, a gated delta rule with a decay per key channel, in most blocks; latent "
        "attention without positional encoding in the rest; a sigmoid-routed mixture with a shared expert."
    ),
    tags=("Linear attention", "Kimi delta attention", "Hybrid attention", "Latent attention"),
    checkpoint="moonshotai/Kimi-Linear-48B-A3B-Instruct",
    model_class="KimiLinearForCausalLM",
    config_class="KimiLinearConfig",
    preview=tiny,
    config_defaults={
        "linear_num_heads": "config.json gives it inside linear_attn_config as num_heads (32); KimiLinearConfig copies it "
                            "from there, and the value happens to equal the class default",
        "linear_head_dim": "config.json gives it inside linear_attn_config as head_dim (128); KimiLinearConfig copies it "
                           "from there, and the value happens to equal the class default",
        "linear_conv_kernel_dim": "config.json gives it inside linear_attn_config as short_conv_kernel_size (4); "
                                  "KimiLinearConfig copies it from there, and the value happens to equal the class default",
    },
)
