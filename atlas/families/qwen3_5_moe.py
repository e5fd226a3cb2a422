"""Qwen3.5 (model_type qwen3_5_moe): the text model of a multimodal hybrid, three linear-attention blocks to one full one.

The checkpoint is a multimodal wrapper; the atlas describes its text model and counts the vision
encoder apart. The blocks follow a fixed pattern: three blocks mix tokens with gated DeltaNet, a
linear attention that carries a fixed-size state from token to token and updates it with the delta
rule, then one block uses full softmax attention over the prefix, with a sigmoid gate on its output and
rotary angles on only part of each head. Every block ends in a mixture of many small routed experts,
a few per token, beside a shared expert whose output passes through its own sigmoid gate.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen3.5",
    vendor="Alibaba Qwen",
    released="2026-02",
    summary=(
        "The text model of a multimodal hybrid: gated DeltaNet blocks interleaved with gated full "
        "attention, each block ending in a fine-grained mixture of experts with a gated shared expert."
    ),
    tags=("Gated DeltaNet", "Hybrid attention", "Multimodal wrapper"),
    checkpoint="Qwen/Qwen3.5-35B-A3B",
    model_class="Qwen3_5MoeForCausalLM",
    config_class="Qwen3_5MoeTextConfig",
    config_section="text_config",
    wrapper_class="Qwen3_5MoeForConditionalGeneration",
    not_applicable={
        "mixture_sum": "a per-token sigmoid gate scales the shared expert's output before it joins the routed "
                       "experts' sum, so routed + shared alone is not the MLP's output; the mixture's proven steps "
                       "apply the gate",
    },
)
