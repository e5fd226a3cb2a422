"""KaTeX, rendered at build time: TeX in, HTML out, each distinct equation rendered once.

pykatex bundles KaTeX 0.16.22 (the version package.json pins for the stylesheet and fonts the site
copies). ``\\htmlClass`` colors the streams, so rendering trusts that one command and is not strict
about the HTML extension. A TeX error fails the build with the equation named.
"""

from __future__ import annotations

import functools

from atlas.errors import AtlasError

# The streams an equation colors, and the CSS class each one gets (static/atlas.css colors them in
# both themes).
STREAMS = {"q": "st-q", "k": "st-k", "v": "st-v", "c": "st-c"}


def stream(name: str, tex: str) -> str:
    """``tex`` wrapped so that it is drawn in the color of a stream: q(uery), k(ey), v(alue), c(ontext)."""
    return r"\htmlClass{" + STREAMS[name] + "}{" + tex + "}"


@functools.lru_cache(maxsize=None)
def render(tex: str, display: bool = True) -> str:
    import pykatex

    try:
        return pykatex.renderToString(
            tex, displayMode=display, trust=True, strict=pykatex.STRICT_IGNORE, throwOnError=True
        )
    except pykatex.ParseError as e:
        raise AtlasError("equation", tex, f"KaTeX cannot render it: {e}") from None
