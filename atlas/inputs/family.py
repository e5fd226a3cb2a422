"""What a family module declares: mostly data, plus the few rules code must supply.

A family module (``atlas/families/<name>.py``) defines ``FAMILY = Family(...)``. Its name is the
module's file name and its long description is the module's docstring; the registry fills both in,
so there is nothing to register anywhere else. A sibling architecture under another name reuses
the sibling's declaration with ``.but(...)`` and states only what differs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class StoredTensor:
    """One tensor a checkpoint's safetensors files hold."""

    name: str
    dtype: str  # safetensors dtype string: "BF16", "F8_E4M3", "F32", ...
    shape: tuple[int, ...]
    role: str  # "parameter" | "buffer" (persistent, counted as a weight) | "scale" | "rotary" (not weights)
    # Weight values packed in one stored element: 2 where two 4-bit values share a byte (MXFP4 blocks).
    values_per_element: int = 1
    # asked of every tensor by every sum over a layout: counted once, when the tensor is made
    elements: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "elements", math.prod(self.shape))

    @property
    def values(self) -> int:
        """The weight values the tensor holds: its elements, unpacked."""
        return self.elements * self.values_per_element

    def renamed(self, name: str) -> StoredTensor:
        """The same tensor under another name. A layout makes one for every expert of every block, and
        this costs a fifth of dataclasses.replace, which goes through __init__ again."""
        twin = object.__new__(StoredTensor)
        twin.__dict__.update(self.__dict__, name=name)
        return twin


@dataclass(frozen=True)
class Family:
    title: str  # the name readers know the family by
    vendor: str
    released: str  # "YYYY-MM" of the pinned checkpoint's release
    summary: str  # one line for the index card and the page header
    tags: tuple[str, ...]
    checkpoint: str  # "org/repo": a folder under atlas/checkpoints/
    model_class: str  # transformers class the family runs, e.g. "DeepseekV3ForCausalLM"
    config_class: str  # transformers configuration class that reads the checkpoint's config.json
    # A multimodal checkpoint is described by its text model: config_section names the key of
    # config.json holding that model's config ("text_config"), and wrapper_class the class the file's
    # architectures names, built only to count what lies outside the text model (a vision tower).
    config_section: str | None = None
    wrapper_class: str | None = None
    # Keys of config.json that the configuration class must not see (remote-code hooks, a model_type
    # transformers does not know) and values forced on it (layers transformers never builds).
    config_drop: tuple[str, ...] = ("model_type", "auto_map", "quantization_config")
    config_overrides: Mapping[str, Any] = field(default_factory=dict)
    # Why each override is needed ({key: why}): every key of config_overrides has one, and the family
    # page shows the file's value, the value used and the reason, so a reader sees every edit.
    override_reasons: Mapping[str, str] = field(default_factory=dict)
    # Integer sizes config.json leaves out on purpose, the configuration class's default being the
    # checkpoint's value: {key: why}. Any other size the model takes from a class default is an error.
    config_defaults: Mapping[str, str] = field(default_factory=dict)
    # Tensors the checkpoint files hold that the transformers model does not (an MTP block, say):
    # a function of the raw config.json that returns them, in file naming.
    stored_extras: Callable[[Mapping[str, Any]], list[StoredTensor]] | None = None
    # Standard names the generic resolver (atlas.model.resolver) places wrongly on this family, as
    # {name: "<module relative to the host>.<input|output>[element]"}; e.g. {"routed_output": "experts.output"}.
    standard_overrides: Mapping[str, str] = field(default_factory=dict)
    # The tiny preview config: a function of the pinned transformers config that returns the values
    # to change (atlas.model.tiny applies them; None takes atlas.model.tiny's generic rule).
    preview: Callable[[Any], dict[str, Any]] | None = None
    # Identities of the preview run (atlas.model.identities ids) that do not hold by design here: {id: why}.
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    # Variants of the equations' steps the family declares instead of measuring them on the preview run,
    # by page-id glob: {"*.gate": {"routing": "sigmoid_renormalized"}}. A wrong one fails the proof.
    equations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The notes files (atlas/families/<name>.md) of the family page, in order; empty: <name>.md.
    notes: tuple[str, ...] = ()
    # The vendor's own active-parameter figure, where it is a range the atlas shows beside its own:
    # {"fewest": int, "most": int, "source": "https://..." (where a reader can check it), "says": its words}.
    published_active: Mapping[str, Any] = field(default_factory=dict)
    # The family's other released sizes of the same architecture: checkpoint folders ("org/repo") under
    # atlas/checkpoints/, each a config.json and checkpoint.json. The page lists every size with its exact
    # figures (atlas.facts.released_sizes); it is drawn from ``checkpoint`` alone.
    sizes: tuple[str, ...] = ()
    # Filled in by the registry from the module: never set these by hand.
    name: str = ""
    doc: str = ""
    module: str = ""

    def call(self, field: str, *args: Any) -> Any:
        """Run one of the family's own functions (``preview``, ``stored_extras``): whatever goes wrong
        in it is the family module's error, named as such."""
        from atlas.errors import AtlasError

        try:
            return getattr(self, field)(*args)
        except KeyboardInterrupt:
            raise
        except AtlasError:
            raise
        except BaseException as e:
            what = f"calls sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {e}"
            raise AtlasError(f"atlas/families/{self.name}.py", field, f"failed: {what}") from None

    def but(self, **changes: Any) -> "Family":
        """This family with some declarations changed: a sibling states only what differs."""
        return dataclasses.replace(self, **changes)
