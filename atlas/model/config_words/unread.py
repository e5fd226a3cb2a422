"""Which keys of a config transformers reads: ``unread_keys``, the keys no file of transformers that
could read them names at all (the library's shared code, and the family's own configuration and
modeling modules). Such a key is still described, and the page says transformers does not read it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any, Mapping

# The parts of transformers that hold model-specific code: only the family's own files count there.
MODELS_DIR = "models"
RELATIVE_IMPORT = re.compile(r"from \.\.(\w+)\.(\w+) import")


WORD = re.compile(r"\w+")


@cache
def _shared_words() -> frozenset[str]:
    """Every word in transformers outside its models folder: configuration, modeling, generation,
    masking, caching, quantization and the rest of the shared code."""
    import transformers

    root = Path(transformers.__file__).parent
    words: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] != MODELS_DIR:
            words.update(WORD.findall(path.read_text(encoding="utf-8")))
    return frozenset(words)


@cache
def _family_words(*classes) -> frozenset[str]:
    """Every word in the source files of the classes' modules and the sibling model files they import from."""
    import importlib.util
    import inspect

    seen: set[str] = set()
    words: set[str] = set()
    todo = [inspect.getsourcefile(cls) for cls in classes]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = Path(path).read_text(encoding="utf-8")
        words.update(WORD.findall(text))
        for package, module in RELATIVE_IMPORT.findall(text):
            found = importlib.util.find_spec(f"transformers.models.{package}.{module}")
            if found and found.origin:
                todo.append(found.origin)
    return frozenset(words)


# Keys that set the layers' own arithmetic. Only the model's modeling code implements that arithmetic,
# so only its files are searched for them: the shared code names some of them for other purposes
# (GGUF conversion tables, fused kernels for other models), and a configuration class may declare
# one that its model never uses (gpt-oss declares hidden_act; its experts use their own gate).
MODEL_SCOPED = frozenset({
    "hidden_act", "hidden_activation", "activation_function", "attention_bias", "mlp_bias", "scoring_func",
    "topk_method", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor", "n_shared_experts",
    "first_k_dense_replace", "moe_layer_freq", "swiglu_limit", "query_pre_attn_scalar", "attn_logit_softcapping",
    "final_logit_softcapping",
})


def unread_keys(raw: Mapping[str, Any], model_class, config_class) -> set[str]:
    """The keys of ``raw`` that transformers never names where it could read them for this model.

    A key of MODEL_SCOPED counts as read where the model's modeling files name it (or the attribute
    the configuration class maps it to); any other key where the shared code, the configuration
    files or the modeling files name it. The match is generous (a name in a comment counts), so a key
    is called unread only when no such code can read it under that name."""
    modeling = _family_words(model_class)
    everything = _shared_words() | _family_words(config_class) | modeling
    aliases = getattr(config_class, "attribute_map", {}) or {}
    unread = set()
    for key in raw:
        names = {key, aliases.get(key, key)}
        if not names & (modeling if key in MODEL_SCOPED else everything):
            unread.add(key)
    return unread
