"""config.json in words: the keys that change no forward pass. Records of where the file came from,
generation's defaults, the settings that serve only training (dropout, initialization, parallelism,
fused kernels), and the heads for classification that the language model does not use.
"""

from __future__ import annotations

import math

from atlas.model.config_words.registry import (
    _built_as,
    _dropout,
    _num,
    _plural,
    _settings,
    _switch,
    _value_words,
    activation_words,
    explains,
)
from atlas.numbers import grouped


# --- records: where the file came from and what it was saved as -----------------------------------

@explains("architectures")
def _architectures(key, v, c):
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        c.fail("architectures", "must be a list of class names")
    return f"The model class the checkpoint was saved from: {', '.join(v)}"


@explains("model_type")
def _model_type(key, v, c):
    return f'The configuration type "{c.text("model_type")}", which transformers\' AutoConfig maps to a configuration class'


@explains("_name_or_path")
def _name_or_path(key, v, c):
    return f'The name the configuration was saved under, "{c.text("_name_or_path")}"; a record only'


@explains("name")
def _name(key, v, c):
    return f'The name the model was saved under, "{c.text("name")}"; a record only'


@explains("transformers_version")
def _transformers_version(key, v, c):
    return f"The transformers version that wrote this file: {c.text('transformers_version')}"


@explains("auto_map")
def _auto_map(key, v, c):
    if not isinstance(v, dict):
        c.fail("auto_map", "must be an object of auto classes")
    return (f"The checkpoint's own remote code for {_plural(len(v), 'auto class', 'auto classes')} ({', '.join(v)}); "
            "transformers' native classes, which the atlas runs, do not use it")


@explains("tokenizer_class")
def _tokenizer_class(key, v, c):
    return f'The tokenizer class to load with the model, "{c.text("tokenizer_class")}"; the model\'s computation does not use it'


@explains("full_attn_mod", "interpolate_factor")
def _undefined_setting(key, v, c):
    return (f"A setting of the checkpoint's original code, {_value_words(v)}, that transformers' configuration class "
            "does not define; this file says nothing more of what it did there")


# --- generation: defaults that change no single forward pass --------------------------------------

@explains("use_cache")
def _use_cache(key, v, c):
    if c.time_mixing():  # no keys or values: the model returns a state list of fixed size
        return ("Generation hands each step the state the last one returned (five numbers a channel and block) by default"
                if c.flag(key) else "Generation recomputes every position by default, keeping no state between steps")
    if c.mamba_stack():  # no keys or values: the cache is each mixer's convolution inputs and scan state
        return ("Generation keeps each mixer's fixed-size state between steps by default" if c.flag(key)
                else "Generation recomputes every position by default, keeping no state between steps")
    return ("Generation keeps a key/value cache by default" if c.flag(key)
            else "Generation recomputes every position by default, keeping no key/value cache")


@explains("cache_implementation")
def _cache(key, v, c):
    return f'The key/value cache generation uses by default: "{c.text("cache_implementation")}"; no effect on a single forward pass'


@explains("task_specific_params")
def _task_params(key, v, c):
    if not isinstance(v, dict):
        c.fail("task_specific_params", "must be an object of settings per task")
    return "Default generation settings per task: " + "; ".join(
        f"{task}: {_settings(s) if isinstance(s, dict) else _value_words(s)}" for task, s in v.items()
    )


@explains("prefix")
def _prefix(key, v, c):
    return (f'Text that the text-generation pipeline puts before each prompt, {_value_words(c.text("prefix"))}; '
            "the model's computation does not use it")


@explains("num_logits_to_keep")
def _logits_to_keep(key, v, c):
    n = c.count("num_logits_to_keep")
    if n == 0:
        return "Generation computes logits for every position of the input (0)"
    last = "last position" if n == 1 else f"last {grouped(n)} positions"
    return f"Generation computes logits for the {last} of the input only, not for every position"


# --- training only: dropout, initialization, parallelism, fused kernels ---------------------------

_dropout("attention_dropout", "the attention pattern")
_dropout("attn_pdrop", "the attention pattern")
_dropout("embd_pdrop", "the embeddings")


@explains("emb_pdrop")
def _emb_pdrop(key, v, c):
    p = c.number("emb_pdrop")
    words = ("No dropout on the embeddings (probability 0)" if p == 0
             else f"Dropout with probability {_num(p)} on the embeddings in training; off at inference")
    if _built_as(c, "DbrxForCausalLM"):
        words += "; transformers' DBRX stores the value but applies no dropout to the embeddings, whatever it is"
    return words


_dropout("resid_pdrop", "each sublayer's output before it is added to the stream")

_dropout("hidden_dropout", "each sublayer's output before it is added to the stream")
_dropout("residual_dropout", "each sublayer's output before it is added to the stream")
_dropout("dropout", "each sublayer's output before it is added to the stream")
_dropout("embedding_dropout", "the embeddings")
_dropout("activation_dropout", "the MLP's activations")
_dropout("summary_first_dropout", "the sequence summary's input")


@explains("layerdrop")
def _layerdrop(key, v, c):
    p = c.number("layerdrop")
    if p == 0:
        return "No block is skipped in training (probability 0); every block runs at inference"
    return f"Each block is skipped with probability {_num(p)} in training (LayerDrop); every block runs at inference"


@explains("initializer_range")
def _init(key, v, c):
    return f"Standard deviation {_num(c.number('initializer_range'))} of the random initialization; trained weights replace it"


@explains("init_std")
def _init_std(key, v, c):
    return f"Standard deviation {_num(c.number('init_std'))} of the random initialization; trained weights replace it"


@explains("block_mlp_init_scale", "block_out_init_scale")
def _init_scale(key, v, c):
    part = "the MLP's" if key == "block_mlp_init_scale" else "the blocks' output projections'"
    return (f"A scale on {part} random initial weights in the original code, {_num(c.number(key))}; "
            "trained weights replace them, so it changes nothing in the model")


_switch("block_use_xavier_init",
        "The original code draws the blocks' initial weights with Xavier initialization; trained weights replace them",
        "The original code does not use Xavier initialization for the blocks; trained weights replace them anyway")
_switch("conv_use_xavier_init",
        "The original code draws the convolution blocks' initial weights with Xavier initialization; trained weights "
        "replace them",
        "The original code does not use Xavier initialization for the convolution blocks; trained weights replace "
        "them anyway")

_switch("rescale_prenorm_residual",
        "The random initialization scales the blocks' output projections down by depth; trained weights replace "
        "them, so it changes nothing in the model",
        "The random initialization does not scale the blocks' output projections by depth; trained weights replace "
        "them anyway")


@explains("w_init_variance_scale")
def _w_init_variance(key, v, c):
    return (f"The variance scale, {_num(c.number(key))}, of the random initialization of the recurrent blocks' "
            "convolution and recurrence gates; trained weights replace it, so it changes nothing in the model")


@explains("final_w_init_variance_scale")
def _final_w_init_variance(key, v, c):
    s = c.number(key)
    words = (f"The variance scale, {_num(s)}, of the random initialization of the attention's and the recurrent "
             "blocks' output projections; trained weights replace it, so it changes nothing in the model")
    layers = c.get_count("num_hidden_layers")
    if layers and _built_as(c, "RecurrentGemmaForCausalLM"):
        own = 2 / layers
        words += (f"; transformers' RecurrentGemmaConfig sets it to 2/num_hidden_layers = 2/{layers} ≈ {own:.4g} "
                  "whatever the file says" + ("; here the two agree" if math.isclose(own, s) else "; here they differ"))
    return words


_switch("gradient_checkpointing",
        "Training recomputes the blocks' activations instead of storing them, to save memory; no effect on a forward pass",
        "Training stores the blocks' activations rather than recomputing them; no effect on a forward pass")


@explains("ep_size")
def _ep_size(key, v, c):
    return f"The expert-parallel degree of the original code ({c.count('ep_size')}); it changes no shape"


@explains("pretraining_tp")
def _tp(key, v, c):
    return f"The tensor-parallel degree of pretraining ({c.count('pretraining_tp')}); it changes no shape"


_switch("bias_dropout_fusion", "The training code fused each bias add with its dropout into one kernel; a speed setting that changes no result",
        "The training code added each bias and applied its dropout as separate kernels")
_switch("masked_softmax_fusion", "The training code fused the attention's mask and softmax into one kernel; a speed setting that changes no result",
        "The training code masked the scores and took their softmax as separate kernels")
_switch("skip_bias_add", "The training code's projections returned their bias apart, to be added in a fused kernel later; the sum is the same",
        "The training code's projections added their own bias")
_switch("skip_bias_add_qkv", "The training code's fused query-key-value projection returned its bias apart, to be added later",
        "The training code's fused query-key-value projection added its own bias")
_switch("slow_but_exact", "With tensor-parallel pretraining, the output projections are summed slice by slice, as the shards were",
        "The output projections run as one matrix product, whatever the tensor-parallel degree of pretraining")


@explains("dense_list")
def _dense_list(key, v, c):
    return f"A list of sizes the training code reads, {_value_words(v)}; its meaning there is not documented in the copy"


# --- heads for classification, not the language model ---------------------------------------------

@explains("summary_type")
def _summary_type(key, v, c):
    return (f'How the sequence-summary head (for classification, not the language model) pools the sequence: '
            f'"{c.text("summary_type")}"')


@explains("summary_activation", unset=True)
def _summary_activation(key, v, c):
    if v is None:
        return "Left unset: the sequence-summary head (for classification, not the language model) applies no activation"
    return f"The sequence-summary head's activation: {activation_words(c.text('summary_activation'))}"


_switch("summary_use_proj", "The sequence-summary head (for classification, not the language model) has a projection",
        "The sequence-summary head (for classification, not the language model) has no projection")
_switch("summary_proj_to_labels", "The sequence-summary projection maps to the label count, not the width",
        "The sequence-summary projection keeps the width")


@explains("n_special")
def _n_special(key, v, c):
    return (f"Special tokens GPT-1's fine-tuning code appends to the vocabulary: {grouped(c.count(key))}; transformers' "
            "class has no such key and adds none")


_switch("predict_special_tokens", "GPT-1's fine-tuning code also scores those appended special tokens",
        "GPT-1's fine-tuning code does not score those appended special tokens")

_switch("add_classification_head", "A classification head is added for training", "No classification head is added")


@explains("class_num")
def _class_num(key, v, c):
    return f"Classes of the optional classification head: {grouped(c.count(key))}"


@explains("pool_type")
def _pool_type(key, v, c):
    return f"How the optional classification head pools the sequence: {_value_words(c.text(key))}"

_dropout("embed_dropout", "the embeddings")
_dropout("attention_probs_dropout_prob", "the attention pattern")
_dropout("hidden_dropout_prob", "the embeddings and each sublayer's output before it is added to the stream")


@explains("runner_max_sequence_length", unset=True)
def _runner_max_sequence_length(key, v, c):
    # a setting of the training code's runner that BigCode's files carry; no transformers class names it
    if v is None:
        return "Left unset: a setting of the training code's runner, which transformers does not read"
    return f"{_value_words(v)}: a setting of the training code's runner, which transformers does not read"
