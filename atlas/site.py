"""Render and write: Jinja2 pages from the facts only, written atomically into the site folder.

The site is built in a temporary folder beside the target and moved into place in one rename, so a
failed build leaves the previous site exactly as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jinja2

from atlas.numbers import grouped

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"


def facts_json(facts: dict[str, Any]) -> str:
    """facts.json: stable key order (the order facts are collected in), UTF-8, newline-terminated."""
    return json.dumps(facts, indent=1, ensure_ascii=False) + "\n"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["grouped"] = grouped
    env.filters["month"] = _month
    return env


MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def _month(released: str) -> str:
    """'2025-07' -> 'Jul 2025'."""
    year, month = released.split("-")
    return f"{MONTHS[int(month) - 1]} {year}"


def render_family(facts: dict[str, Any]) -> dict[str, str]:
    """The files of one family's folder, by path relative to the site root."""
    name = facts["family"]["name"]
    env = _environment()
    return {
        f"{name}/index.html": env.get_template("family.html").render(f=facts, root="../"),
        f"{name}/facts.json": facts_json(facts),
    }


def render_index(all_facts: list[dict[str, Any]]) -> str:
    return _environment().get_template("index.html").render(families=all_facts, root="")


def write_site(out: Path, family_files: dict[str, str], known_families: list[str]) -> None:
    """Write the built families into ``out``, keeping the other families it already holds."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.building-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        if out.is_dir():
            shutil.copytree(out, staging)
        else:
            staging.mkdir()
        for rel, text in family_files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        _copy_static(staging)
        present = [
            json.loads((staging / name / "facts.json").read_text(encoding="utf-8"))
            for name in known_families
            if (staging / name / "facts.json").is_file()
        ]
        (staging / "index.html").write_text(render_index(present), encoding="utf-8")
        _swap(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def _copy_static(staging: Path) -> None:
    """Our own CSS and scripts, and KaTeX's stylesheet and fonts from the installed npm package."""
    target = staging / "static"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(STATIC, target)


def _swap(staging: Path, out: Path) -> None:
    previous = out.parent / f".{out.name}.previous-{os.getpid()}"
    if out.exists():
        out.rename(previous)
    staging.rename(out)
    if previous.exists():
        shutil.rmtree(previous)
