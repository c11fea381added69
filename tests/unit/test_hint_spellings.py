"""fleet's own words never give a spelling fleet calls deprecated (issue 46, item 6): every
string in fleet/ (hints, notes, help, file headers, schema descriptions) is read, and one that
names `--format json`, `fleet check --baseline FILE` or `fleet hosts --json` without a target
fails, except where it says the spelling is deprecated."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

DEPRECATED = re.compile(
    r"--format json|check --baseline FILE|hosts --json(?! (FILE|-))|--baseline FILE"
)
SAYS_SO = re.compile(r"deprecated|old spelling|the spelling of", re.IGNORECASE)


def strings(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):  # an f-string, its pieces joined
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            yield node.lineno, str(text)


def comments(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#") :]


def test_no_deprecated_spelling_in_what_fleet_says() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text.strip()[:100]}"
        for path in sorted((ROOT / "fleet").rglob("*.py"))
        for line, text in [*strings(path), *comments(path)]
        if DEPRECATED.search(text) and not SAYS_SO.search(text)
    ]
    found += [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "fleet" / "schemas").glob("*.json"))
        if DEPRECATED.search(path.read_text())
    ]
    assert found == []


def test_the_pattern_finds_what_it_is_for() -> None:
    assert DEPRECATED.search("… 3 more: --format json lists them all")
    assert DEPRECATED.search("fleet hosts --json alone")
    assert not DEPRECATED.search("fleet hosts --json FILE")
    assert not DEPRECATED.search("fleet check --baseline-file FILE")
