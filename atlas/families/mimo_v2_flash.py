"""MiMo-V2-Flash (model_type mimo_v2_flash): Xiaomi's sparse mixture of experts with a sliding-window
and global attention pattern.

Five of every six blocks attend within a short sliding window, with twice the key/value heads of the
global blocks and a learned sink per head; the first block and every sixth after it attend globally.
Queries and keys are wider than values, only about a third of each head is rotated, with a rotary base
of its own for each kind of block, and the values are scaled by a constant before the heads are mixed.
After one dense block, every block's feed-forward is a mixture of routed experts chosen by sigmoid
scores with a selection bias.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="MiMo-V2-Flash",
    vendor="Xiaomi",
    released="2025-12",
    summary=(
        "A sparse mixture of experts whose blocks mostly attend in a short sliding window with sinks, "
        "the others globally, with narrower values than keys and partial rotary positions."
    ),
    tags=("Sliding/global pattern", "Attention sinks", "Partial rotary", "Sigmoid routing", "Dense first blocks"),
    checkpoint="XiaomiMiMo/MiMo-V2-Flash",
    model_class="MiMoV2FlashForCausalLM",
    config_class="MiMoV2FlashConfig",
    # six tiny blocks (the pattern's dense global block 0, windowed mixtures, a global mixture at block 5):
    # half the generic rule's 64 experts keeps the run's record under the preview's size
    preview=lambda config: {"n_routed_experts": 32},
    not_applicable={
        "attention_rows": "in the windowed blocks each head's learned sink logit joins the softmax and takes part of every row's probability mass",
        "attention_softmax": "in the windowed blocks the softmax runs over the scores and the head's sink logit together; the sink's column is dropped after it",
    },
)
