"""The family registry: one module per family, found by file name. Nothing else registers a family."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache


from atlas.errors import AtlasError
from atlas.family import Family


def names() -> list[str]:
    """Every family, sorted: the public module files in this folder."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@cache
def load(name: str) -> Family:
    if name not in names():
        raise KeyError(name)
    source = f"atlas/families/{name}.py"
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except Exception as e:  # a family module with a mistake is the user's input: name it, no traceback
        line = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        raise AtlasError(source, None, f"cannot be imported{line}: {type(e).__name__}: {e}") from None
    declared = getattr(module, "FAMILY", None)
    if not isinstance(declared, Family):
        raise AtlasError(source, "FAMILY", "missing: the module must define FAMILY = Family(...)")
    return declared.but(name=name, doc=inspect.cleandoc(module.__doc__ or ""), module=module.__name__)
