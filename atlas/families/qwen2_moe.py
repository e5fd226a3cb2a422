"""Qwen1.5-MoE (model_type qwen2_moe): Qwen2's biased attention, then routed experts plus a shared expert behind a sigmoid gate.

The attention is Qwen2's: rotary multi-head attention whose query, key and value projections carry
biases (the output projection does not). Every block's MLP is a mixture with two paths. The routed
path takes a softmax over all routed experts' logits and keeps the num_experts_per_tok largest
probabilities without renormalising them. The shared path is one wide SwiGLU MLP that every token
passes through, and its output is scaled, token by token, by the sigmoid of a single learned logit
(shared_expert_gate, one weight row over the width) before the two paths are added. So the shared
expert's share of the output is itself decided per token, not fixed.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen1.5-MoE",
    vendor="Qwen (Alibaba)",
    released="2024-03",
    summary=(
        "Qwen2's biased rotary attention, then many narrow routed experts picked by softmax top-k plus one "
        "wide shared expert whose output a per-token sigmoid gate scales."
    ),
    tags=("Shared expert", "Gated shared expert", "Softmax top-k routing"),
    checkpoint="Qwen/Qwen1.5-MoE-A2.7B",
    model_class="Qwen2MoeForCausalLM",
    config_class="Qwen2MoeConfig",
    not_applicable={
        "mixture_sum": (
            "the shared expert's output is multiplied by a per-token sigmoid gate before it is added, so the "
            "plain sum of the routed and shared outputs is not the mixture's output; the mixture's proven steps "
            "include the gate"
        ),
    },
)
