"""Qwen3 (model_type qwen3): a Llama-style dense decoder with RMSNorm on every query and key head.

The block is the familiar pre-norm pair: RMSNorm, grouped-query attention with rotary positions, add;
RMSNorm, SwiGLU MLP, add. Qwen3 adds q_norm and k_norm, RMSNorms over head_dim applied to each query
and key head before the rotary embedding, which keeps attention logits in range without the qkv biases
that Qwen2 used. The head width is set by head_dim in the config, not by hidden_size / heads, so the
attention projections need not be square.

The larger checkpoints keep a separate output head; the small ones tie it to the token embedding (see
the qwen3_0_6b family, which is this module with another checkpoint).
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen3",
    vendor="Qwen (Alibaba)",
    released="2025-04",
    summary=(
        "A pre-norm decoder with grouped-query attention whose query and key heads are each normalised "
        "by an RMSNorm before rotary positions, and a SwiGLU MLP."
    ),
    tags=("Q/K norm", "SwiGLU", "Dense"),
    checkpoint="Qwen/Qwen3-8B",
    sizes=("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B",
           # the mixtures of experts of the same release, built by Qwen3MoeForCausalLM (their own page: qwen3_moe)
           "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B"),
    model_class="Qwen3ForCausalLM",
    config_class="Qwen3Config",
)
