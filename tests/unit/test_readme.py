"""The README is a front door (issue 47): what fleet is, the two set-up commands on the first
screen, five minutes of use, the exit codes, links to docs/; the manual lives in docs/. And every
relative link of the README and of docs/ leads to a file that is there, with the heading it
names."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

MAX_README_LINES = 250
SET_UP = (
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/fleet probe -i inventory/local.yaml",
    "bash .ci/run",
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_short_with_both_set_up_commands_on_its_first_screen() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    first = "\n".join(lines[:40])
    for command in SET_UP:
        assert command in first, command


def test_the_readme_links_the_docs_it_promises() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("fabric", "probes", "hosts", "guarantees", "scale"):
        assert f"](docs/{page}.md)" in text, page


def anchors(path: Path) -> set[str]:
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        fenced = fenced != line.startswith("```")
        if not fenced and line.startswith("#"):
            words = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            found.add(words.replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in anchors(linked)
        ):
            broken.append(target)
    return broken


def test_the_readme_and_docs_links_lead_somewhere() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = {str(p.relative_to(ROOT)): found for p in pages if (found := broken_links(p))}
    assert broken == {}


def test_a_broken_link_is_seen(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [no](there.md#nope)\n")
    assert broken_links(page) == ["missing.md", "there.md#nope"]
