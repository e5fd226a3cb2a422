"""The keys a config.json gives a mixture's sizes under, by whichever name its family uses.

Plain data, read by the input checks (``atlas.inputs.preflight``) on the raw file and by the model's
sizes (``atlas.model.sizes``) on a transformers config.
"""

EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")  # the config's routed experts, by whichever name it uses
TOP_K_KEYS = ("num_experts_per_tok", "top_k_experts")  # the config's experts per token (Gemma 4: top_k_experts)
