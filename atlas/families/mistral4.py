"""Mistral 4 (model_type mistral4): the text model of Mistral Small 4, latent attention over a softmax-routed mixture.

Each block is pre-norm. Attention is multi-head latent attention as in DeepSeek-V2: queries come from a
low-rank latent, keys and values from one shared latent per token, with a rotary part of each query and
key rotated under YaRN. The mixture's router takes a softmax over all experts' logits, keeps the
top num_experts_per_tok (one group, so no group pruning) and renormalises the kept weights; a shared
expert runs on every token beside them. Llama 4's position-dependent query scale is built in but only
acts past the original context length. The released checkpoint wraps this model with a vision encoder,
which the atlas leaves out.
"""

from atlas.inputs.family import Family


def _tiny_rotary(config) -> dict:
    """The rotary parameters without the share of each head rotated: Mistral4Config derives it from the
    tiny qk_rope_head_dim and qk_nope_head_dim again, where the pinned one (64 of 128) would rotate more
    dimensions than the tiny heads' rotary part holds."""
    rope = {k: v for k, v in config.rope_parameters.items() if k != "partial_rotary_factor"}
    return {"rope_parameters": rope}

FAMILY = Family(
    title="Mistral Small 4",
    vendor="Mistral AI",
    released="2026-03",
    summary=(
        "The text model of a vision-language checkpoint: multi-head latent attention with YaRN, then a "
        "softmax-routed mixture of small SwiGLU experts with one shared expert in every block."
    ),
    tags=("Latent attention", "Shared expert", "YaRN", "Top-k routing"),
    checkpoint="mistralai/Mistral-Small-4-119B-2603",
    model_class="Mistral4ForCausalLM",
    config_class="Mistral4Config",
    preview=_tiny_rotary,
)
