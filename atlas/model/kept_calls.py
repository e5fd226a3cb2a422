"""What a module's forward computes between its own inputs and outputs, kept by patching the torch
functions it calls while it runs (the softmax of an inline eager attention, the sigmoids of an RG-LRU):
the hooks ``atlas.model.trace`` opens around such a module."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator


@contextmanager
def _keeping(owner, name: str, keep: Callable[[Any, Any], Any]) -> Iterator[list]:
    """``owner.name`` (a torch function) patched for the block's forward to keep ``keep(input, output)`` of
    each call, in order; put back after."""
    kept: list = []
    original = getattr(owner, name)

    def keeping(input, *args, **kwargs):
        out = original(input, *args, **kwargs)
        kept.append(keep(input, out))
        return out

    setattr(owner, name, keeping)
    try:
        yield kept
    finally:
        setattr(owner, name, original)


def softmax_inputs():
    """Keep the input of every softmax called inside the block: the eager attention's masked scores."""
    import torch.nn.functional as F

    return _keeping(F, "softmax", lambda input, out: input)


def softmax_calls():
    """Keep (input, output) of every softmax called inside the block: the masked scores and the pattern."""
    import torch.nn.functional as F

    return _keeping(F, "softmax", lambda input, out: (input, out))


def _hooks_keeping(module, keeping, stored: Callable[[list], None]) -> list:
    """Hooks that open ``keeping()`` (a context that yields a list and fills it) around the module's
    forward, and hand the filled list to ``stored`` when the forward returns."""
    state: dict[str, Any] = {}

    def before(m, args, kwargs):
        state["context"] = keeping()
        state["kept"] = state["context"].__enter__()

    def after(m, args, kwargs, output):
        context = state.pop("context", None)
        if context is not None:
            context.__exit__(None, None, None)
            stored(state.pop("kept"))

    return [module.register_forward_pre_hook(before, with_kwargs=True), module.register_forward_hook(after, with_kwargs=True)]


def inline_score_hooks(capture, module, index: int) -> list:
    """Hooks that keep the input of the softmax an inline eager attention calls (its masked scores)."""
    def heads_apart(scores):
        # fairseq-style attention (XGLM) folds the heads into the batch axis: (batch * heads, query, key)
        if scores is not None and scores.dim() == 3 and capture.batch_seq and scores.shape[0] % capture.batch_seq[0] == 0:
            return scores.unflatten(0, (capture.batch_seq[0], -1))
        return scores

    def stored(kept: list) -> None:
        scores, probabilities = kept[0] if kept else (None, None)
        capture.store("attention_scores", index, heads_apart(scores))
        # where the module returns no pattern beside its output (GPT-1's attention, unless asked for it),
        # the softmax's own output is it; a pattern the module returns is read after this and replaces it
        capture.store("attention_probabilities", index, heads_apart(probabilities))

    return _hooks_keeping(module, softmax_calls, stored)


def sigmoid_outputs():
    """Keep the output of every torch.sigmoid called inside the block (an RG-LRU's two gates, in order)."""
    import torch

    return _keeping(torch, "sigmoid", lambda input, out: out)


def sigmoid_hooks(capture, module, wanted: list[tuple[str, int, int]]) -> list:
    """Hooks that keep the outputs of the sigmoids a module's forward calls: (name, block index, which
    sigmoid) for each value read there (an RG-LRU's input gate is its first, its recurrence gate its second)."""
    def stored(kept: list) -> None:
        for name, index, element in wanted:
            capture.store(name, index, kept[element] if element < len(kept) else None)

    return _hooks_keeping(module, sigmoid_outputs, stored)
