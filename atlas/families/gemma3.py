"""Gemma 3 text (model_type gemma3_text): Gemma 2's sandwich block with q/k norms and mostly local attention.

The block keeps Gemma 2's sandwich of RMSNorms around attention and around the GeGLU MLP, the
sqrt(hidden_size) scaling of the embedding and the tied output head. Attention soft-capping is gone;
instead each query and key head passes through an RMSNorm (q_norm, k_norm) before the rotary embedding.
Most blocks attend within a short sliding window and every sliding_window_pattern-th block attends over
the whole prefix, so config.layer_types repeats several local blocks then one global one. The two kinds
use different rotary bases: rope_local_base_freq for the local blocks and rope_theta
for the global ones. The 1B checkpoint is text only and loads as Gemma3ForCausalLM.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Gemma 3 (text)",
    vendor="Google",
    released="2025-03",
    summary=(
        "Gemma's sandwich-normed block with q/k norms, mostly sliding-window blocks with a periodic global "
        "one, and a separate rotary base for each kind."
    ),
    tags=("Sliding/global pattern", "Q/K norm", "Sandwich norms", "Tied embeddings"),
    checkpoint="google/gemma-3-1b-it",
    sizes=("google/gemma-3-4b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it"),
    model_class="Gemma3ForCausalLM",
    config_class="Gemma3TextConfig",
)
