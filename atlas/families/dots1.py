"""dots.llm1 (model_type dots1): Qwen3-style normed attention with DeepSeek-V3-style sigmoid routing, shared experts and a dense first block.

Attention is full multi-head attention (as many key-value heads as query heads) with an RMSNorm on
each query and key head before the rotary embedding, as in Qwen3. The first first_k_dense_replace
blocks keep a dense SwiGLU MLP; every later block is a mixture in DeepSeek-V3's manner: each routed
expert is scored by the sigmoid of its logit, a learned per-expert bias is added only to choose the
num_experts_per_tok experts, and the chosen experts' unbiased scores are renormalised to one and
multiplied by routed_scaling_factor. Shared experts (one MLP as wide as n_shared_experts experts)
run on every token and are added to the routed sum. There are no expert groups.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="dots.llm1",
    vendor="rednote (Xiaohongshu) hi lab",
    released="2025-06",
    summary=(
        "Per-head q/k-normed multi-head attention, then sigmoid-routed experts with a selection bias and "
        "shared experts after a dense first block."
    ),
    tags=("Sigmoid routing", "Shared expert", "Q/K norm", "Dense first blocks"),
    checkpoint="rednote-hilab/dots.llm1.base",
    model_class="Dots1ForCausalLM",
    config_class="Dots1Config",
    config_overrides={"n_group": 1, "topk_group": 1},
    override_reasons={
        "n_group": (
            "the released config gives it no value, meaning the experts are not grouped; transformers' Dots1 router "
            "divides the experts by n_group and fails without a number, and one group is the same routing without groups"
        ),
        "topk_group": (
            "the released config gives it no value; with a single group, keeping that one group leaves every expert a "
            "candidate, which is what the missing value means"
        ),
    },
)
