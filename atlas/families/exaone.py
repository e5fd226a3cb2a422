"""EXAONE 3 (model_type exaone): LG's first open decoders, a Llama block under GPT-2-style key names, run by transformers on Llama's classes.

transformers has no EXAONE 3 model of its own: its configuration class reads the released file's
GPT-2-style names (num_layers, layer_norm_epsilon, activation_function) as Llama's, and the model is
LlamaForCausalLM. Each block is the pre-norm arrangement: an RMSNorm, grouped-query attention with
rotary positions, the residual add, a second RMSNorm and a SwiGLU MLP, with no biases. The output head
is a separate matrix. EXAONE 3.5 (2.4B, 7.8B, 32B) keeps the block and the key names, with a longer
context and, at 2.4B, a head tied to the embedding: its sizes are listed beside the 3.0 model.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="EXAONE 3",
    vendor="LG AI Research",
    released="2024-08",
    summary=(
        "A Llama-shaped grouped-query decoder without biases whose configuration uses GPT's older key names, "
        "with a SwiGLU MLP and a separate output head."
    ),
    tags=("SwiGLU", "Dense"),
    checkpoint="LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct",
    model_class="LlamaForCausalLM",
    config_class="ExaoneConfig",
    sizes=("LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct", "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct", "LGAI-EXAONE/EXAONE-3.5-32B-Instruct"),
    config_overrides={"architectures": ["LlamaForCausalLM"]},
    override_reasons={"architectures": (
        "the released file names ExaoneForCausalLM, the class of the Hub repository's remote code; transformers "
        "has no class of that name and builds the model type exaone as LlamaForCausalLM")},
)
