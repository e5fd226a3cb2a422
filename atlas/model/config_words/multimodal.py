"""config.json in words: multimodal configs. The text, vision and audio sections of a wrapper's config,
how images enter the text (soft tokens, media embeddings), and the image encoder's own settings.
"""

from __future__ import annotations

from typing import Any

from atlas.model.config_words.registry import (
    _Config,
    _built_as,
    _entries,
    _plural,
    _switch,
    _value_words,
    activation_words,
    explains,
    settings_words,
)
from atlas.numbers import grouped


# --- the sections of a multimodal config ----------------------------------------------------------

def _section(c: _Config, key: str, v: Any) -> dict:
    if not isinstance(v, dict):
        c.fail(key, "must be an object of settings")
    return v


@explains("text_config")
def _text_config(key, v, c):
    v = _section(c, key, v)
    return (f"The language model's own configuration, {_plural(len(v), 'key')}; the atlas builds the text model from "
            "this section and explains its keys on their own lines")


@explains("vision_config")
def _vision_config(key, v, c):
    v = _section(c, key, v)
    return f"The vision tower's configuration, {_plural(len(v), 'key')}: {settings_words(v)}"


@explains("audio_config", unset=True)
def _audio_config(key, v, c):
    if v is None:
        return ("Left unset: the checkpoint has no audio tower, so the wrapper builds no audio encoder and no "
                "embedder for audio features")
    v = _entries(c, key, v)
    return f"The audio tower's configuration, {_plural(len(v), 'key')}: {settings_words(v)}"


# --- how images enter the text --------------------------------------------------------------------

@explains("vision_soft_tokens_per_image")
def _soft_tokens(key, v, c):
    n = c.count("vision_soft_tokens_per_image")
    words = f"Each image enters the text as {_plural(n, 'soft token')}, the vision tower's pooled outputs"
    if _built_as(c, "Gemma4ForConditionalGeneration"):
        words += ("; transformers' Gemma 4 takes the count from its image processor instead, which sets each image's "
                  "count from its size, up to the processor's own max_soft_tokens")
    return words


@explains("mm_tokens_per_image")
def _mm_tokens(key, v, c):
    n = c.count(key)
    side = int(n ** 0.5)  # the projector's own rounding: a square grid of int(√n) a side
    return (f"Each image enters the text as {_plural(side * side, 'soft token')}: the projector average-pools the "
            f"vision tower's square grid of patch outputs to {side} × {side}, and those embeddings replace the "
            f"image placeholders")


@explains("num_media_embeds")
def _media_embeds(key, v, c):
    return f"Embeddings each image contributes to the sequence: {grouped(c.count(key))}"


@explains("org_vocab_size")
def _org_vocab(key, v, c):
    return f"The vocabulary before any tokens were added for media, {grouped(c.count(key))} entries"


_switch("position_embedding_xdrope", "Positions of media tokens use the XD rotary layout", "No XD rotary layout for media tokens")


@explains("anyres_pooling_size")
def _anyres_pool(key, v, c):
    return f"Pooling window over image features at any resolution: {grouped(c.count(key))}"


# --- the image encoder's own settings -------------------------------------------------------------

_switch("anyres_vit_two_views", "The image encoder looks at two views of each image", "The image encoder looks at one view of each image")
_switch("skip_cls_token", "The image encoder's class token is left out", "The image encoder's class token is kept")

_switch("vit_add_patchemb_bias", "The image patch embedding carries a bias", "The image patch embedding has no bias")
_switch("vit_remove_prenorm", "The image encoder drops its first norm", "The image encoder keeps its first norm")
_switch("vit_used_rms_norm", "The image encoder uses RMSNorm", "The image encoder uses LayerNorm")


@explains("anyres_vit_max_image_size", "vit_path", "vit_type", "xdrope_section", unset=True)
def _vision_unset(key, v, c):
    return f"A setting of the image encoder, {_value_words(v)}" if v is not None else "Left unset: no image encoder is configured here"


@explains("vit_input_resolution", "vit_patch", "vit_token")
def _vit_size(key, v, c):
    what = {"vit_input_resolution": "input resolution in pixels", "vit_patch": "patch size", "vit_token": "tokens per image"}[key]
    return f"The image encoder's {what}: {grouped(c.count(key))}"


@explains("vit_mapping_type", "vit_norm_type")
def _vit_kind(key, v, c):
    what = {"vit_mapping_type": "how image features are mapped into the stream", "vit_norm_type": "the image encoder's norm"}[key]
    return f"{what[0].upper() + what[1:]}: {_value_words(c.text(key))}"


# --- the projector from the vision tower into the text --------------------------------------------

_switch("multimodal_projector_bias", "The two linear maps that carry image features into the text stream have biases",
        "The two linear maps that carry image features into the text stream have no biases")


@explains("projector_hidden_act")
def _projector_act(key, v, c):
    return f"The activation between the projector's two linear maps: {activation_words(c.text(key))}"


@explains("spatial_merge_size")
def _spatial_merge(key, v, c):
    n = c.count(key)
    return (f"Before the projector, each {n}×{n} square of neighbouring image patches is merged into one token, "
            f"so an image enters the text with one token for every {_plural(n * n, 'patch', 'patches')}")


@explains("vision_feature_layer")
def _vision_feature_layer(key, v, c):
    if isinstance(v, list):
        return f"The image features are the vision tower's hidden states at layers {_value_words(v)}, side by side"
    if isinstance(v, bool) or not isinstance(v, int):
        c.fail(key, f"must be a layer index or a list of them, not {_value_words(v)}")
    if v == -1:
        return "The image features are the vision tower's last hidden states (index -1)"
    return f"The image features are the vision tower's hidden states at layer index {v}"
