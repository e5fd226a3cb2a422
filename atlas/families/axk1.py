"""A.X K1 (model_type axk1): SK Telecom's DeepSeek-V3 layout with one more RMSNorm after each mixture.

Each block is pre-norm with multi-head latent attention (a query latent, one key-value latent per token
and a shared rotary key part). The first block has a dense SwiGLU MLP; the others a mixture whose
router scores experts with a sigmoid, adds a learned selection bias for the choice only, keeps the best
topk_group of n_group expert groups and then the top num_experts_per_tok experts, and scales the
renormalised weights by routed_scaling_factor; a shared expert runs beside them. A.X K1's one change
is an RMSNorm on the mixture's output before it joins the stream.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="A.X K1",
    vendor="SK Telecom",
    released="2026-01",
    summary=(
        "DeepSeek-V3's latent attention and sigmoid-routed, group-limited mixture with a shared expert "
        "after one dense block, with an RMSNorm on each mixture's output."
    ),
    tags=("Latent attention", "Shared expert", "Dense first blocks"),
    checkpoint="skt/A.X-K1",
    model_class="AXK1ForCausalLM",
    config_class="AXK1Config",
    not_applicable={
        "mixture_sum": (
            "the mixture normalises the sum of its routed and shared outputs (post_mlp_layernorm) before it "
            "returns it, so its output is the RMSNorm of that sum, not the sum itself"
        ),
    },
)
