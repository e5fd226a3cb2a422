"""Arcee (model_type arcee): Arcee AI's AFM, Llama's block with an ungated squared-ReLU MLP.

Each block is pre-norm: an RMSNorm, grouped-query attention with rotary positions, the residual add, a
second RMSNorm and the MLP. Where Llama's MLP has three matrices, AFM's has two: an up
projection, a squared ReLU, and a down projection, with no gate. No projection has a bias, the rotary
frequencies are stretched by YaRN past the trained context, and the output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="AFM (Arcee)",
    vendor="Arcee AI",
    released="2025-07",
    summary=(
        "Llama's grouped-query block with an ungated squared-ReLU MLP of two matrices, where Llama's has three; "
        "YaRN rotary positions and an untied head."
    ),
    tags=("Squared ReLU", "Ungated MLP", "YaRN", "Dense"),
    checkpoint="arcee-ai/AFM-4.5B",
    model_class="ArceeForCausalLM",
    config_class="ArceeConfig",
)
