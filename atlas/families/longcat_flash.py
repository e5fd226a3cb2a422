"""LongCat-Flash (model_type longcat_flash): two rounds of latent attention and a dense MLP per block, with a
mixture of experts on a shortcut, some of whose experts compute nothing.

Each block runs multi-head latent attention (MLA, as in DeepSeek-V3, with both latents scaled by the
square root of the width over their rank) then a dense SwiGLU MLP, twice, each sublayer after its own
RMSNorm and added back to the residual stream. The mixture of experts reads the same normed input as the
first dense MLP, but its output joins the stream only at the block's end, after the second attention and
MLP: a shortcut that lets the expert computation overlap the dense path.

The router scores n_routed_experts real experts and zero_expert_num zero-computation experts with one
softmax; a selection bias (e_score_correction_bias) decides which top-k win, and the winners' softmax
scores, scaled by routed_scaling_factor, weigh them. A token sent to a zero expert gets its own input
back, times that weight; it multiplies no matrix, so the compute a token costs varies with how many of
its slots land on real experts.

transformers allocates the fused gate and up projection of the experts with a slot for every routing
choice, zero experts included, while the released files store weights for the real experts only; the
atlas counts what the files hold and states the difference.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY, TINY_TOP_K


def tiny(config):
    """Two blocks (num_hidden_layers counts attentions, two a block), the rotary width the tiny heads'
    rotary part has, and zero experts in the checkpoint's share of the routing choices."""
    return {
        "num_hidden_layers": 4, "num_layers": 2,
        "head_dim": TINY["qk_rope_head_dim"],
        "zero_expert_num": round(TINY_TOP_K * config.zero_expert_num / config.num_experts_per_tok),
    }


FAMILY = Family(
    title="LongCat-Flash",
    vendor="Meituan",
    released="2025-08",
    summary=(
        "Two rounds of latent attention and a dense MLP per block, plus a mixture of experts on a shortcut whose "
        "router can pick zero-computation experts."
    ),
    tags=("Latent attention", "Zero-computation experts", "Shortcut MoE"),
    checkpoint="meituan-longcat/LongCat-Flash-Chat",
    model_class="LongcatFlashForCausalLM",
    config_class="LongcatFlashConfig",
    config_overrides={"head_dim": 64},
    override_reasons={"head_dim": (
        "The rotary embedding sizes its frequencies by head_dim, and only the qk_rope_head_dim (64) rotary dims of "
        "each query and key head are turned; the released file gives no head_dim, so it is set to qk_rope_head_dim "
        "here rather than left to the class default, which agrees only by coincidence."
    )},
    preview=tiny,
    published_active={
        "fewest": 18_600_000_000, "most": 31_300_000_000,
        "source": "https://huggingface.co/meituan-longcat/LongCat-Flash-Chat",
        "says": ("the model card's introduction: 18.6B to 31.3B parameters activated per token, about 27B on average, "
                 "depending on how many routing slots land on zero-computation experts"),
    },
    not_applicable={"block_sum": (
        "a block runs two attentions and two dense MLPs besides the mixture, so its input plus the first "
        "attention's output and the mixture's output leaves out three of the five things the block adds to the stream"
    )},
)
