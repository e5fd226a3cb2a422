"""How equations color what they are about, the same in the steps' TeX (atlas.proof) and the pages' own
symbols (atlas.render): a base module, so that neither stage imports the other for it."""

from __future__ import annotations

# The streams an equation colors, and the CSS class each one gets (static/atlas.css colors them in
# both themes). The steps' TeX and the pages' own symbols (atlas.render) draw them alike.
STREAMS = {"q": "st-q", "k": "st-k", "v": "st-v", "c": "st-c"}


def stream(name: str, tex: str) -> str:
    """``tex`` wrapped so that it is drawn in the color of a stream: q(uery), k(ey), v(alue), c(ontext)."""
    return r"\htmlClass{" + STREAMS[name] + "}{" + tex + "}"
