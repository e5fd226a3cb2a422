"""Words checked against the model: no sentence may claim a feature the family's facts contradict.

A vocabulary of architectural claims (rotary, ALiBi, NoPE, learned positions, biases, LayerNorm and
RMSNorm, gated MLPs, top-k and hash routing, sliding windows, chunks, softcaps, sinks, shared experts,
parallel blocks, mixtures of experts), each a pattern of words and the feature of the model's profile
(``atlas.model.architecture``) it asserts. A claim made where the profile has no such feature fails
the build in one line that names the claim, where it was said, and the fact it contradicts.

What is checked: the family module's title, summary, tags and docstring (typed prose), every page of
the family's folder (its visible text), and each component's own title and description against that
component alone (a router's words against that router, not against another block's).

A claim is not made where its clause takes it back (a clause lies between two of . ; : ( ) — and
an element's end): a denial before it ("no", "neither", "without", "instead of" ...), one of the few
that deny what came before ("is gone", "applies none"), or a hedge anywhere ("would", "if", "where",
"any": what a configuration could do, not what this model does). The vocabulary and these rules are
``atlas.model.architecture``'s, which collect and rendering use too.

Not read as prose: code shown verbatim (as ``atlas.check.visible_text`` exempts it), KaTeX's TeX
sources, a proof's list of facts by name ("shared expert: False"), and config.json's words printed
beside the fact that contradicts them (``disclaimed_config``).
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable

from atlas.errors import AtlasError
from atlas.check.visible_text import EXEMPT_ELEMENTS, SHOWN_ATTRIBUTES
from atlas.model.architecture import FEATURE_WORDS, NODE_FEATURES, POSITION_WORDS, claims_in, node_profile, profile

def contradiction(feature: str, found: dict[str, Any]) -> str:
    """The fact a claim of ``feature`` contradicts, in words."""
    has = [("" if name == "alibi" else "a ") + words for name, words in POSITION_WORDS.items() if found.get(name) and name != "no_positions"]
    if feature == "no_positions":
        return f"every attention is given positions (by {' and '.join(has)})"
    if feature in POSITION_WORDS:
        return f"the model has no {POSITION_WORDS[feature]}: " + (f"its positions come from {' and '.join(has)}" if has else "its attention is given no positions")
    if feature == "window":
        return "no attention has a window narrower than the context it is configured for"
    return f"the facts find no {FEATURE_WORDS.get(feature, feature.replace('_', ' '))}"


def check_text(where: str, text: str, found: dict[str, Any], field: str | None = None) -> None:
    """One error at the first claim of ``text`` that ``found`` (a profile) contradicts."""
    for name, feature, context in claims_in(text):
        if not found.get(feature):
            raise AtlasError(where, (f"{field}, " if field else "") + f'claim "{name}"', f'says "{context}"; {contradiction(feature, found)}')


def check_family_words(facts: dict[str, Any]) -> None:
    """The family module's typed prose against the model it describes."""
    family = facts["family"]
    found = profile(facts)
    where = family["module"].replace(".", "/") + ".py"
    for field in ("title", "summary", "doc"):
        check_text(where, family.get(field) or "", found, field)
    derived = {name.lower(): f for f in facts.get("features", []) for name in (f["abbreviation"], f["name"])}
    for tag in family.get("tags", []):
        check_text(where, tag, found, f"tag {tag!r}")
        if tag.lower() in derived:
            f = derived[tag.lower()]
            raise AtlasError(where, f"tag {tag!r}", f"the build derives it from the model as {f['abbreviation']} ({f['evidence']}): "
                             "drop the typed tag")


# --- the pages -------------------------------------------------------------------------------------

def disclaimed_config(facts: dict[str, Any]) -> dict[str, str]:
    """config.json's keys whose words (what the key means to the configuration class) claim a feature this
    model lacks, each with the fact: the page prints it beside them (GPT-J's n_positions names a learned
    position table, which a rotary model does not have), and the page check leaves those words alone."""
    found = profile(facts)
    disclaimed = {}
    for key, words in facts["config"]["explained"].items():
        wrong = next((feature for _, feature, _ in claims_in(words or "") if not found.get(feature)), None)
        if wrong:
            disclaimed[key] = contradiction(wrong, found)
    return disclaimed


TAG = re.compile(r"<[^>]*>")
ENDS = re.compile(r"</[^>]*>|<(?:br|td|li|p)\b[^>]*>")  # an element's end, or a new row, cell or item: a clause ends
ATTRIBUTE = re.compile(r'\b(' + "|".join(SHOWN_ATTRIBUTES) + r')="([^"]*)"')
# Not prose: TeX sources under KaTeX's output, the facts list of a proof (a fact's name and value, "shared
# expert: False"), and config.json's words printed with the fact that contradicts them.
HIDDEN = re.compile(r'<annotation\b[^>]*>.*?</annotation>|<ul class="eq-facts-list">.*?</ul>|<td class="disclaimed">.*?</td>', re.S)


def visible_text(page: str) -> str:
    """The words a reader sees (and hears) on a page, its verbatim code left out: each element's text and
    its shown attributes, an element's end a clause's end (a table cell does not run into the next)."""
    page = HIDDEN.sub(" ", EXEMPT_ELEMENTS.sub(" ", page))
    shown = [m.group(2) + "." for m in ATTRIBUTE.finditer(page)]
    text = TAG.sub(" ", ENDS.sub(". ", page))
    return html.unescape(" ".join(shown) + " " + text)


def check_pages(facts: dict[str, Any], files: dict[str, str], component_words: dict[str, str]) -> None:
    """Every page of the family against the model, then each component's own words against itself."""
    found = profile(facts)
    for path in sorted(files):
        if path.endswith(".html"):
            check_text(f"page {path}", visible_text(files[path]), found)
    for component, words in sorted(component_words.items()):
        own = found if component in ("model", "blocks") else node_profile(facts, component)  # the two pages of the whole
        for name, feature, context in claims_in(words):
            if feature in NODE_FEATURES and not own.get(feature):
                raise AtlasError(f"page {facts['family']['name']}/c/{component}.html", f'claim "{name}"',
                                 f'says "{context}"; {contradiction(feature, own)} in this component')
