"""Names echoed in an error line, kept on that line.

A tensor name, a shard name, a repository or a path comes from a file or a server the atlas does not
control; one holding a newline would split the error into lines, the second of which could pose as an
`error:` of its own. Each control character is written as its backslash escape instead.
"""

from __future__ import annotations

import re

# C0 and C1 controls (newline, carriage return, escape, NEL ...), the Unicode line and paragraph
# separators, and the bidirectional overrides that would show a name reversed on a terminal.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def one_line(text: object) -> str:
    """``text`` with every control character written as its escape (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
