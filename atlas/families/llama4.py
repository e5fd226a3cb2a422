"""Llama 4 Scout (model_type llama4): the text model of a multimodal mixture of experts, with chunked attention and NoPE blocks.

The checkpoint is a multimodal wrapper; the atlas describes its text model, and counts the vision
encoder and projector apart. Every block is a mixture: a router picks one of the routed experts per
token and gives it the sigmoid of its logit as a score; the token's row is multiplied by that score
before it enters the expert's SwiGLU (not after), and a shared expert is added for every token. Attention is grouped-query. Three of every four blocks rotate queries and keys
and attend within fixed-size chunks of the sequence (a query sees only earlier positions of its own
chunk), with an RMSNorm without weights on queries and keys; the fourth block uses no rotary angles at
all and attends over the whole prefix, scaling its queries up with the position (temperature tuning)
so that attention stays sharp over long contexts.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Llama 4 Scout",
    vendor="Meta",
    released="2025-04",
    summary=(
        "The text model of a multimodal mixture of experts: one routed expert per token plus a shared "
        "one, chunked rotary attention in most blocks and global no-position attention in the rest."
    ),
    tags=("Chunked attention", "NoPE blocks", "Multimodal wrapper"),
    checkpoint="meta-llama/Llama-4-Scout-17B-16E",
    model_class="Llama4ForCausalLM",
    config_class="Llama4TextConfig",
    config_section="text_config",
    wrapper_class="Llama4ForConditionalGeneration",
    # one routed expert per token is the family's rule: the preview keeps it (and the pinned share of experts)
    preview=lambda config: {"num_experts_per_tok": 1, "num_local_experts": config.num_local_experts},
    config_overrides={"attn_temperature_tuning": True},
    override_reasons={"attn_temperature_tuning": (
        "the copy gives the integer 4, which transformers 5.24 refuses for this switch; Llama 4's "
        "no-position blocks do tune their query temperature, so the switch is on."
    )},
)
