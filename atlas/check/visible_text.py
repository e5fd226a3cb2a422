"""What a reader sees must never say None, undefined, NaN or null: a page check run before writing.

Those four words are what a missing value turns into on its way to a page (Python's None, JSON's
null, JavaScript's undefined and NaN); as whole words in a page's visible text they mean a fact was
absent and the page printed the absence instead of saying what it means.

Visible text is every text node outside <script> and <style>, plus the attributes a reader is shown
or read aloud: title (a tooltip), aria-label, alt and placeholder.

Exempt are only the places that show code verbatim, where these words are the code's own:

- ``<pre class="code">``: transformers' source excerpts (``is not None`` is Python);
- ``<pre class="printout">``: what ``print(model)`` printed;
- ``<code class="json">``: config.json's values as released (``null`` is JSON);
- ``<code class="language-python">``: the python blocks of the notes, which are source;
- ``<code class="message">``: a library's own message, quoted verbatim where nnsight, nnterp or
  TransformerLens does not reach a value (its ``None`` is the library's word).

What a notes block printed (``<pre class="output">``) is not exempt: it is the run's answer, and a
None there is as much a missing fact as anywhere else.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from atlas.errors import AtlasError
from atlas.numbers import UNSAID, UNSAID_WORDS

VERBATIM_CLASSES = frozenset({"code", "printout", "json", "language-python", "message"})
VERBATIM_TAGS = frozenset({"pre", "code"})
HIDDEN_TAGS = frozenset({"script", "style"})
SHOWN_ATTRIBUTES = ("title", "aria-label", "alt", "placeholder")
# Elements that never have an end tag: they open nothing the parser must wait to see closed.
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
CONTEXT = 40  # characters of text shown on each side of the offending word


class _Reader(HTMLParser):
    """Collects (word, context) for every offending word in the visible text of one page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, bool, bool]] = []  # (tag, verbatim, hidden) of each open element
        self.found: list[tuple[str, str]] = []
        self.recent = ""  # the end of the visible text read so far: the context before a word

    def _inside(self) -> tuple[bool, bool]:
        return any(v for _, v, _ in self.open), any(h for _, _, h in self.open)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        verbatim, hidden = self._inside()
        for name in SHOWN_ATTRIBUTES:
            if a.get(name) and not hidden:
                self._scan(a[name], f"{tag} {name}=")
        if tag in VOID:
            return
        classes = set((a.get("class") or "").split())
        self.open.append((tag, tag in VERBATIM_TAGS and bool(classes & VERBATIM_CLASSES), tag in HIDDEN_TAGS))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        # Close up to the matching element; an end tag that matches nothing open is ignored.
        for depth in range(len(self.open) - 1, -1, -1):
            if self.open[depth][0] == tag:
                del self.open[depth:]
                return

    def handle_data(self, data):
        verbatim, hidden = self._inside()
        if not (verbatim or hidden):
            self._scan(data, "", self.recent)
            self.recent = " ".join((self.recent + " " + data).split())[-CONTEXT:]

    def _scan(self, text: str, prefix: str, earlier: str = ""):
        for match in UNSAID.finditer(text):
            before = " ".join((earlier + " " + text[:match.start()]).split())[-CONTEXT:]
            after = " ".join(text[match.end():].split())[:CONTEXT]
            context = f"{before} {match.group(1)} {after}".strip()
            self.found.append((match.group(1), prefix + context))


# The exempt elements as the templates write them. None of them can nest inside itself (a <pre> holds
# no <pre>, a <code> no <code>, a script ends at its first </script>), so each match is exactly one
# exempt element; the elements of other spellings are simply left for the parser.
EXEMPT_ELEMENTS = re.compile(
    r'<script\b[^>]*>.*?</script>|<style\b[^>]*>.*?</style>|<pre class="(?:code|printout)">.*?</pre>'
    r'|<code class="(?:json|language-python|message)">.*?</code>', re.S)


def _may_say(page: str) -> bool:
    """False where the page certainly says none of the words: the page without its exempt elements
    holds every visible text and attribute, so no match there means none anywhere. Parsing is slow
    (the site is tens of megabytes); this test is a regex, and only a page that fails it is parsed."""
    text = html.unescape(EXEMPT_ELEMENTS.sub("", page))
    # the regex is slow on a long page; the words as plain substrings are a quick first test
    return any(word in text for word in UNSAID_WORDS) and bool(UNSAID.search(text))


def unsaid_words(page: str) -> list[tuple[str, str]]:
    """Every None, undefined, NaN or null in the page's visible text: (word, the text around it)."""
    if not _may_say(page):
        return []
    reader = _Reader()
    reader.feed(page)
    reader.close()
    return reader.found


def check_page(page: str, text: str) -> None:
    """One error, naming the page and the text, at the first offending word."""
    found = unsaid_words(text)
    if found:
        word, context = found[0]
        more = f" (and {len(found) - 1} more on this page)" if len(found) > 1 else ""
        raise AtlasError(f"page {page}", None, f'the visible text says "{word}": "{context}"{more}')


def check_pages(pages: dict[str, str]) -> None:
    """Every HTML page of ``pages`` (path relative to the site -> text), in path order."""
    for path in sorted(pages):
        if path.endswith(".html"):
            check_page(path, pages[path])
