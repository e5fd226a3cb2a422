"""config.json in words: each released key explained from its own value and the config around it.

The explainers are grouped by what they explain, one module a topic: positions, attention, experts
(mixtures and their routing), norms, mlp, sizes (widths, depth, layer kinds, vocabulary, embeddings),
wiring (parallel blocks, biases, residual scales), quantization (how the weights are stored),
state_space and hybrid (Mamba, linear-attention, convolution and recurrent blocks, and where each
kind sits), time_mixing (RWKV's own keys), value_mask (Doge's mask window and mixture switch), shared_blocks (Zamba2's), tokens (special-token ids), multimodal (sub-configs, image settings) and records (keys
that change no forward pass). Each registers its keys in ``registry.EXPLAIN`` when imported; this
package imports every one of them, so every key is registered wherever the words are read.
``registry`` holds the machinery they share and imports none of them; ``unread`` finds the keys
transformers never reads.

May import: atlas.model.quantization, atlas.inputs and the base modules (atlas.errors, atlas.numbers), and
transformers inside functions.
"""

from atlas.model.config_words import (  # noqa: F401  (imported for the keys they register)
    attention,
    experts,
    hybrid,
    mlp,
    multimodal,
    norms,
    positions,
    quantization,
    records,
    shared_blocks,
    sizes,
    state_space,
    time_mixing,
    value_mask,
    tokens,
    wiring,
)
from atlas.model.config_words.registry import NO_WORDS, explain_config, settings_words, standard_names
from atlas.model.config_words.unread import unread_keys

__all__ = ["NO_WORDS", "explain_config", "settings_words", "standard_names", "unread_keys"]
