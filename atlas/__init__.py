"""The architecture atlas: facts about transformer families, computed from the models themselves."""

__all__ = ["MissingValue", "trace", "casts_as_written"]


def __getattr__(name: str):
    """The capture API, ``with atlas.trace(model) as t: model(ids)`` (a value the run lacks raises
    MissingValue), imported when first asked for: importing any module of the atlas (the render
    stage, a no-op rebuild) then loads no more than that module needs."""
    if name == "casts_as_written":  # the notes' way to see the model's own float32 casts (atlas.model.precision)
        from atlas.model import precision

        return precision.casts_as_written
    if name in __all__:
        from atlas.model import trace

        return getattr(trace, name)
    raise AttributeError(f"module 'atlas' has no attribute {name!r}")
