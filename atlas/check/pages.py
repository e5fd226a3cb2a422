"""The checks made while a family's pages are rendered: every link leads to a page, every drawn part names
a value the family produces, and every evidence item holds what it is cited for; and one made on every
page the site publishes: none is too heavy to read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.facts import excerpt_text


def check_pages(view: dict[str, Any], family: str) -> None:
    """What the pages state about the accounting, their links and their values, checked before anything
    is written: every table sums to its component's count, every link inside a family points at a page,
    every listed value is one the family produces and has its page, and the diagram names no other."""
    nodes = view["nodes"]
    check_evidence(nodes, family)
    for name, value in view["values"].items():
        if value["read_at"] is None or value["blocks"] == []:
            raise AtlasError(f"family {family}", f"value {name}", "listed, but support() places it nowhere in this family")
        if f"value.{name}" not in nodes:
            raise AtlasError(f"family {family}", f"value {name}", "listed, but has no page")
    for nid, node in nodes.items():
        if node["type"] == "component" and not node["equations"]:
            raise AtlasError(f"family {family}", nid, "the page has no proven equations: no chain of steps reproduced its module on the preview run")
        if node["type"] == "component" and node["accounting"]:
            total = sum(row["parameters"] for row in node["accounting"])
            if total != node["parameters"]:
                raise AtlasError(f"family {family}", nid, f"the accounting table sums to {grouped(total)}, the component has {grouped(node['parameters'])}")
        for ref in node["crumbs"] + node["children"] + node["tensors"] + [r for r in node["accounting"] if r.get("id")] + _more_links(node):
            if ref["id"] not in nodes:
                raise AtlasError(f"family {family}", nid, f"links to {ref['id']!r}, which has no page")
        if node["type"] == "tensor":
            product = 1
            for n in node["shape"]:
                product *= n
            if product != node["parameters"]:
                raise AtlasError(f"family {family}", nid, f"shape {node['shape']} holds {product} elements, not {node['parameters']}")
    for d in view["diagram"]["kinds"]:
        for b in d["boxes"]:
            if b["link"] is not None and b["link"] not in nodes:
                raise AtlasError(f"family {family}", f"diagram {d['kind']}", f"{b['label']} links to {b['link']!r}, which has no page")
    for step in view["diagram"]["flow"]:
        if step["link"] is not None and step["link"] not in nodes:
            raise AtlasError(f"family {family}", "diagram flow", f"{step['label']} links to {step['link']!r}, which has no page")
    drawn = [(f"diagram {d['kind']}", p) for d in view["diagram"]["kinds"] for p in d["boxes"] + d["adds"] + d["terminals"]]
    for where, p in drawn + [("diagram flow", step) for step in view["diagram"]["flow"]]:
        if p["part"] is not None and p["part"] not in view["values"]:
            raise AtlasError(f"family {family}", where, f"a part names {p['part']!r}, a value the family does not produce")


def check_sheet(sheet: dict[str, Any], nodes: dict[str, Any], family: str) -> None:
    """Every figure of the fact sheet links to a page of the family (or an anchor of its page)."""
    for where, href in sheet_links(sheet):
        if href.startswith("c/") and href[2:-len(".html")] not in nodes:
            raise AtlasError(f"family {family}", f"fact sheet {where}", f"links to {href}, which is not a page of the family")


def sheet_links(sheet: dict[str, Any]) -> list[tuple[str, str]]:
    """Every link of the fact sheet, by the figure it leads from: each must reach where it is derived."""
    links = []
    for key, figure in sheet.items():
        for item in figure if isinstance(figure, list) else [figure]:
            if isinstance(item, dict):
                links += [(key, item[k]) for k in ("href", "active_href") if k in item]
    return links


def _more_links(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The links of a page beyond its crumbs, children, tensors and table: its inputs' pages, what feeds
    an input, what produces a value and where it is handed over."""
    ids = [x["link"] for x in (node["io"] or {}).get("in", []) if x.get("link")]
    ids += [h["id"] for h in node.get("fed_by", []) if h["id"]] + [p["id"] for p in node.get("producers", [])]
    ids += [node[k] for k in ("receiver", "receiver_id", "input_id") if node.get(k)]
    return [{"id": i} for i in ids]


def check_evidence(nodes: dict[str, Any], family: str) -> None:
    """Every evidence item holds what it is cited for: each text in its ``contains`` (a call such as
    ``self.kv_b_proj(``, an attribute such as ``self.weight``) is in the code of the excerpt it shows
    (comments aside), and that excerpt is the text its pinned sha256 was verified for."""
    for nid, node in nodes.items():
        for ev in node["evidence"]:
            name = f"{ev['class']}.{ev['part']} ({ev['path']} lines {ev['start']}–{ev['end']})"
            if excerpt_text.sha256(ev["text"]) != ev["sha256"]:
                raise AtlasError(f"family {family}", nid, f"the evidence {name} shows other lines than the pinned excerpt")
            if ev["direct"] and not ev["contains"]:
                raise AtlasError(f"family {family}", nid, f"the direct evidence {name} names nothing it contains")
            for text in ev["contains"]:
                if not excerpt_text.lines_containing(ev, text):
                    raise AtlasError(f"family {family}", nid, f"the evidence {name} does not contain `{text}`")


# A page past this many bytes is one nobody scrolls to the end of, and slow on a phone: the repeats that
# make a page that heavy (a printout of every block) are folded, never the facts dropped.
MAX_PAGE_BYTES = 300_000


def check_page_size(page: str, text: str) -> None:
    """One page's HTML, as UTF-8, under MAX_PAGE_BYTES; the error names the page and its size."""
    _weigh(page, len(text.encode("utf-8")))


def check_page_sizes(site: Path) -> None:
    """Every HTML page under ``site`` (the staged site, the families kept from an earlier build included),
    by its size on disk, in path order; the first too heavy is the error."""
    for path in sorted(site.rglob("*.html")):
        _weigh(path.relative_to(site).as_posix(), path.stat().st_size)


def _weigh(page: str, size: int) -> None:
    if size > MAX_PAGE_BYTES:
        raise AtlasError(f"page {page}", None, f"{grouped(size)} bytes, over the {grouped(MAX_PAGE_BYTES)} a page may weigh")
