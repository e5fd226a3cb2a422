"""The one error type a user sees: it names the file and the field that are wrong."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent) + "/"


class AtlasError(Exception):
    """A build input or a build check is wrong.

    ``where`` is the file (or family) at fault and ``field`` the key, tensor or check inside it, so
    the message alone tells the user what to open and what to look at.
    """

    def __init__(self, where: str, field: str | None, problem: str):
        where = str(where)
        # a file of the project is named as a user sees it from the project: atlas/checkpoints/...
        self.where = where[len(ROOT):] if where.startswith(ROOT) else where
        self.field = field
        self.problem = problem
        super().__init__(str(self))

    def __reduce__(self):
        # rebuilt from its three parts when it crosses from a worker process (pickle would otherwise
        # call AtlasError(message) and fail on the missing arguments)
        return (type(self), (self.where, self.field, self.problem))

    def __str__(self) -> str:
        location = f"{self.where}: {self.field}" if self.field else self.where
        return one_line(f"{location}: {self.problem}")  # whatever a name holds, the error stays one line


# Every control character (C0, DEL, C1), the two Unicode line separators, and the bidirectional marks and
# overrides: any of them in a name the error echoes (a tensor name, a path, a repository a server named)
# could end the line early, let the rest pose as an `error:` line of its own, or show the name reversed.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": r"\n", "\r": r"\r", "\t": r"\t"}


def one_line(text: object) -> str:
    """``text`` with each control character written as an escape (a newline as ``\\n``), so that it
    prints as one line whatever names it echoes. Applied twice it changes nothing more."""
    return _BREAKS.sub(lambda m: _NAMED.get(m.group()) or f"\\u{ord(m.group()):04x}", str(text))
