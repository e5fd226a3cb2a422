"""Where a family's modeling code comes from: its transformers folder, and the folders its modular file
imports modeling code from (facts["lineage"]; the compare pages say which families share code)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def lineage(model) -> dict[str, Any]:
    """facts["lineage"]: the model's transformers folder and the folders its modular file imports modeling code from."""
    module = type(model).__module__  # transformers.models.deepseek_v3.modeling_deepseek_v3
    parts = module.split(".")
    model_type = parts[2] if len(parts) > 3 and parts[1] == "models" else parts[-1]
    import importlib

    folder = Path(importlib.import_module(module).__file__).parent
    modular = folder / f"modular_{model_type}.py"
    written_from: list[str] = []
    source = None
    if modular.is_file():
        source = f"transformers/models/{model_type}/{modular.name}"
        text = modular.read_text(encoding="utf-8")
        written_from = sorted({m for m in re.findall(r"^from \.\.(\w+)\.modeling_\w+ import", text, re.M) if m != model_type})
    return {"model_type": model_type, "written_from": written_from, "source": source}
