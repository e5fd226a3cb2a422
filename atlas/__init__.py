"""The architecture atlas: facts about transformer families, computed from the models themselves."""

# The capture API: ``with atlas.trace(model) as t: model(ids)``; a value the run lacks raises MissingValue.
from atlas.model.trace import MissingValue, trace  # noqa: E402

__all__ = ["MissingValue", "trace"]
