"""Solar Open (model_type solar_open): Upstage's 100B mixture, Llama's attention over GLM-4.5's router and experts in every block.

Every block is pre-norm: an RMSNorm, grouped-query attention with rotary positions and no q/k norms or
biases (Llama's), the residual add, a second RMSNorm and a mixture of experts. The mixture is GLM-4.5's:
the router scores each expert with a sigmoid, adds a learned per-expert bias only to choose the top
num_experts_per_tok, and renormalises the chosen experts' unbiased scores; one shared expert runs on
every token and is added to the routed sum. Unlike GLM-4.5 no block keeps a dense MLP. Rotary
frequencies carry a YaRN stretch to twice the trained context. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Solar Open",
    vendor="Upstage",
    released="2025-12",
    summary=(
        "Llama's grouped-query attention over a sigmoid-routed mixture with a selection bias and one shared "
        "expert in every block, with YaRN-stretched rotary positions."
    ),
    tags=("Shared expert", "Selection bias", "YaRN"),
    checkpoint="upstage/Solar-Open-100B",
    model_class="SolarOpenForCausalLM",
    config_class="SolarOpenConfig",
    config_defaults={
        "n_group": (
            "the released file gives no expert groups (a public port's slice of it notes the key is absent); "
            "SolarOpenConfig's default of one group means the top-k is taken over all experts at once"
        ),
        "topk_group": (
            "absent from the released file like n_group; with one group, the one group is kept"
        ),
    },
)
