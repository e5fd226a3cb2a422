"""config.json in words: RWKV's own keys. The time mixing's width, the length its CUDA kernel is compiled
for, and the halving of the stream and of the output projections that transformers applies in eval mode.
"""

from __future__ import annotations

from atlas.model.config_words.registry import explains
from atlas.numbers import grouped, ordinal


@explains("attention_hidden_size")
def _time_mixing_width(key, v, c):
    width = c.count(key)
    same = " (the stream's own width)" if width == c.get_count("hidden_size") else ""
    return (f"The width of every block's time mixing: its key, value and receptance, and the recurrence's channels, "
            f"each {grouped(width)} wide{same}")


@explains("context_length")
def _kernel_length(key, v, c):
    return (f"The longest sequence one call may run through the optional CUDA kernel, which is compiled for it: "
            f"{grouped(c.count(key))}; the recurrence itself has no limit, and the CPU path and calls that continue "
            "from a state take any length")


@explains("rescale_every")
def _rescale(key, v, c):
    every = c.count(key)
    layers = c.get_count("num_hidden_layers")
    if every == 0:
        return "The model never rescales its stream (0 turns the halving off)"
    words = (f"In eval mode transformers halves the stream after every {ordinal(every)} block and divides the output "
             f"projections of the time and channel mixing by 2 for every {grouped(every)} blocks before them")
    if layers and layers > every:
        words += f" (here blocks {every} to {layers - 1}, divided by up to {2 ** ((layers - 1) // every):,})"
    return words + "; the logits stay the same up to the final norm's epsilon, and training mode multiplies the weights back"
