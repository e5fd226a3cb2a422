"""DeepSeek-V2-Lite (model_type deepseek_v2): latent attention without a query latent, and a softmax-routed mixture of small experts.

Attention is multi-head latent attention. Keys and values are rebuilt, head by head, from one small
latent per token (kv_a_proj_with_mqa, an RMSNorm, kv_b_proj), which is what a cache needs to keep,
together with a short rotary key shared by every head. Unlike the larger V2 and V3 models, this small
one computes its queries directly (q_proj) rather than through a low-rank query latent. The rotary part
is turned pair by pair: the model treats each two adjacent dims as one complex number and multiplies
it by a complex factor per position, whose size carries YaRN's attention correction. After a single
dense SwiGLU block, every block is a mixture of experts: a softmax router scores the routed experts,
each token keeps the top few with their raw probabilities (no renormalisation), and two shared experts
run on every token beside them. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="DeepSeek-V2-Lite",
    vendor="DeepSeek",
    released="2024-05",
    summary=(
        "Multi-head latent attention with direct queries and complex-number rotary pairs, then a "
        "softmax-routed mixture of small experts with shared experts, after one dense block."
    ),
    tags=("Latent attention", "Shared expert", "YaRN", "Dense first blocks"),
    checkpoint="deepseek-ai/DeepSeek-V2-Lite",
    sizes=("deepseek-ai/DeepSeek-V2",),
    model_class="DeepseekV2ForCausalLM",
    config_class="DeepseekV2Config",
)
