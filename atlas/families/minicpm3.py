"""MiniCPM3 (model_type minicpm3): a small dense model with DeepSeek-style latent attention and depth-scaled residual adds.

Attention is multi-head latent attention: queries are rebuilt from a low-rank latent (q_a_proj, an
RMSNorm, q_b_proj), and keys and values from a second, smaller latent that is what a cache would keep
(kv_a_proj_with_mqa, an RMSNorm, kv_b_proj). Each query and key head has a part without position and a
short rotary part, and the rotary part of the key is one vector shared by every head. The MLP is a plain
SwiGLU; there are no experts. Three scales follow the maximal-update recipe: the token embeddings are
multiplied by scale_emb, each sublayer's output is multiplied by scale_depth divided by the square root
of the number of layers before it joins the residual stream, and the final stream is divided by the
width over dim_model_base before the output head reads it. The head is tied to the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="MiniCPM3",
    vendor="OpenBMB",
    released="2024-09",
    summary=(
        "A dense decoder with multi-head latent attention, embeddings scaled up, residual updates scaled "
        "down with depth and the final stream scaled before the head."
    ),
    tags=("Residual scaling", "Scaled logits", "SwiGLU", "Dense"),
    checkpoint="openbmb/MiniCPM3-4B",
    model_class="MiniCPM3ForCausalLM",
    config_class="MiniCPM3Config",
)
