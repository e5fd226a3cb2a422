"""Granite 3.3 (model_type granite): a Llama-shaped decoder whose every stage carries a fixed scale from the config.

The layers are the standard pre-norm kind: RMSNorm, grouped-query attention with rotary positions, an
add, RMSNorm, a SwiGLU MLP, an add, with no biases. What differs is four constants. The token
embeddings are multiplied by embedding_multiplier before the first block. Attention scores use
attention_multiplier as their scale instead of one over the square root of the head width. Each
sublayer's output is multiplied by residual_multiplier, a number below one, before it joins the
residual stream, so every block nudges the stream rather than adding to it at full strength. And the
head's logits are divided by logits_scaling on the way out. These constants come from the maximal-update
style of training, where scales are set so that settings tuned on a small model carry over to a large
one. The output head is tied to the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Granite 3.3",
    vendor="IBM",
    released="2025-04",
    summary=(
        "A grouped-query SwiGLU decoder with fixed scales at every stage: on the embeddings, the attention "
        "scores, each residual add and the logits."
    ),
    tags=("Residual scaling", "Scaled logits", "SwiGLU", "Dense"),
    checkpoint="ibm-granite/granite-3.3-8b-base",
    model_class="GraniteForCausalLM",
    config_class="GraniteConfig",
)
