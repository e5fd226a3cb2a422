"""The family registry: one module per family, found by file name. Nothing else registers a family."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache


from atlas.errors import AtlasError
from atlas.inputs.family import Family


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
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a family module with a mistake is the user's input: name it, no traceback
        line = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else _line_in(e, source)
        what = f"calls sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
        raise AtlasError(source, None, f"cannot be imported{line}: {what}") from None
    declared = getattr(module, "FAMILY", None)
    if not isinstance(declared, Family):
        raise AtlasError(source, "FAMILY", "missing: the module must define FAMILY = Family(...)")
    return declared.but(name=name, doc=inspect.cleandoc(module.__doc__ or ""), module=module.__name__)


def _line_in(error: BaseException, source: str) -> str:
    """Where in the family's own file the error was raised, as " (line N)", if it was there."""
    import traceback

    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith(source)]
    return f" (line {lines[-1]})" if lines else ""
