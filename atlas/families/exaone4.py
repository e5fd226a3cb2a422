"""EXAONE 4.0 (model_type exaone4): LG's decoder that normalises each sublayer's output and each head's queries and keys.

A block sends the raw residual stream into attention and into the MLP; an RMSNorm follows each
sublayer, on its output, and only then is the result added back (post_attention_layernorm,
post_feedforward_layernorm): there is no norm in front of either sublayer. Inside attention, queries
and keys get an RMSNorm of their own per head, over one head's width, before the rotation, and
several query heads share each key/value head (grouped-query attention). The MLP is SwiGLU without
biases. The configuration can mix sliding-window layers with global ones that skip the rotation; the
small checkpoint here marks every layer as full attention, so every layer rotates and sees the whole
context. Rotary frequencies carry the llama3 stretch, and the output head reuses the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="EXAONE 4.0",
    vendor="LG AI Research",
    released="2025-07",
    summary=(
        "A grouped-query decoder that normalises each sublayer's output rather than its input, with "
        "per-head RMSNorm on queries and keys and a head tied to the embedding."
    ),
    tags=("Post-norm sublayers", "Q/K norm", "SwiGLU", "Dense"),
    checkpoint="LGAI-EXAONE/EXAONE-4.0-1.2B",
    model_class="Exaone4ForCausalLM",
    config_class="Exaone4Config",
)
