"""config.json in words: special-token ids. What each declared token does (begins or ends a sequence,
pads a batch, holds an image's, a video's or an audio clip's place, opens or closes one), and the ids a
training config reserves for roles the model's layers do not treat apart.
"""

from __future__ import annotations

from atlas.model.config_words.registry import (
    EXPLAIN,
    SPEAKS_FOR_UNSET,
    _alias,
    _built_as,
    _value_words,
    explains,
)
from atlas.numbers import grouped


def _token(key: str, role: str) -> None:
    SPEAKS_FOR_UNSET.add(key)

    def explain(key, v, c):
        if v is None:
            return f"Left unset: no {role} token is declared"
        if isinstance(v, list):
            return f"Token ids {', '.join(str(c.count(key, t)) for t in v)} each {ROLE_VERBS[role][1]}"
        return f"Token id {c.count(key)} {ROLE_VERBS[role][0]}"

    EXPLAIN[key] = explain


ROLE_VERBS = {  # what one token id does, and what each of several does
    "beginning-of-sequence": ("begins a sequence", "begin a sequence"),
    "end-of-sequence": ("ends a sequence", "end a sequence"),
    "padding": ("pads a batch", "pad a batch"),
    "unknown": ("stands for text the vocabulary has no token for", "stand for text the vocabulary has no token for"),
    "image placeholder": ("holds an image's place in the text; the vision tower's features replace its embedding",
                          "hold an image's place in the text; the vision tower's features replace their embeddings"),
    "video placeholder": ("holds a video's place in the text; the vision tower's features replace its embedding",
                          "hold a video's place in the text; the vision tower's features replace their embeddings"),
    "audio placeholder": ("holds an audio clip's place in the text; the audio tower's features replace its embedding",
                          "hold an audio clip's place in the text; the audio tower's features replace their embeddings"),
    "vision-start": ("opens an image or a video in the text", "open an image or a video in the text"),
    "vision-end": ("closes an image or a video in the text", "close an image or a video in the text"),
    "image-start": ("opens an image in the text", "open an image in the text"),
    "image-end": ("closes an image in the text", "close an image in the text"),
    "audio-start": ("opens an audio clip in the text", "open an audio clip in the text"),
    "audio-end": ("closes an audio clip in the text", "close an audio clip in the text"),
}
_token("bos_token_id", "beginning-of-sequence")
_token("eos_token_id", "end-of-sequence")
_token("pad_token_id", "padding")
_token("unk_token_id", "unknown")
_token("image_token_id", "image placeholder")
_token("video_token_id", "video placeholder")
_token("vision_start_token_id", "vision-start")
_token("vision_end_token_id", "vision-end")
# the image markers of Llama 4's multimodal wrapper
_token("boi_token_index", "image-start")
_token("eoi_token_index", "image-end")
_alias("image_token_index", "image_token_id")


def _audio_and_image_markers() -> None:
    """Gemma 4's audio placeholder and its image and audio markers: a _token each, with a note where
    the config or the class leaves them unused."""
    plain = {}
    for key, role in (("audio_token_id", "audio placeholder"), ("boi_token_id", "image-start"),
                      ("eoi_token_id", "image-end"), ("boa_token_id", "audio-start"), ("eoa_token_id", "audio-end")):
        _token(key, role)
        plain[key] = EXPLAIN[key]

    def audio_token(key, v, c):
        words = plain[key](key, v, c)
        if v is not None and "audio_config" in c.raw and c.raw["audio_config"] is None:
            words += "; audio_config is unset here, so no audio tower exists to fill it"
        return words

    def marker(key, v, c):
        words = plain[key](key, v, c)
        if v is not None and _built_as(c, "Gemma4ForConditionalGeneration"):
            words += ("; Gemma 4's model never looks for it: its processor writes the marker into the prompt from "
                      "the tokenizer's own token, so the id here is a record")
        return words

    EXPLAIN["audio_token_id"] = audio_token
    for key in ("boi_token_id", "eoi_token_id", "boa_token_id", "eoa_token_id"):
        EXPLAIN[key] = marker

    def eoa_index(key, v, c):
        words = marker("eoa_token_id", v, c.renamed("eoa_token_id", key, v))
        other = c.raw.get("eoa_token_id") if "eoa_token_id" in c.raw else ...
        if other is ...:
            return words
        if other == v:
            words += "; eoa_token_id holds the same id"
            if _built_as(c, "Gemma4ForConditionalGeneration"):
                words += ", and of the two names Gemma 4's configuration class declares only this one"
            return words
        return f"{words}; eoa_token_id says {_value_words(other)}"

    EXPLAIN["eoa_token_index"] = eoa_index


_audio_and_image_markers()


# Special-token ids a training config reserves (Hunyuan's): the role each key names.
RESERVED_TOKENS = {
    "eod_token_id": "end of a document", "sep_token_id": "separator", "pad_id": "padding (a second spelling of pad_token_id)",
    "im_start_id": "start of a chat message", "im_end_id": "end of a chat message", "im_newline_id": "line break inside a message",
    "image_token_id": "place of an image", "mask_init_id": "first mask token", "text_start_id": "start of text",
    "text_end_id": "end of text", "video_start_id": "start of a video", "video_end_id": "end of a video",
}


def _reserved(key, v, c):
    return f"Token id {grouped(c.count(key))}, reserved as the {RESERVED_TOKENS[key]}; the model's layers treat it like any other token"


# image_token_id is among them: its words here replace the placeholder's above (it stays one of the
# keys that speak for an unset value).
for _key in RESERVED_TOKENS:
    EXPLAIN[_key] = _reserved


@explains("decoder_start_token_id")
def _decoder_start(key, v, c):
    # generation reads it only for encoder-decoder models; a decoder-only file may still carry it
    if v is None:
        return "Left unset: no token starts a decoder's output"
    return (f"Token id {c.count(key)} would start the output of an encoder-decoder model's decoder; generation with a "
            "decoder-only model does not use it")
