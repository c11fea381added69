"""The answer to `--import` on the HTML page: each spec asked, then per set of hosts that
answered alike the name that resolved and its version, or what was tried when nothing resolved;
as the terminal and Markdown say it (fleet/units/imports/answers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.render.html.markup import esc, row, table
from fleet.units.imports.answers import asked_imports

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "imports"
NAV = "imports"
TITLE = "Imports asked (--import)"
INTRO = "which name of each spec resolved, and its package's version, per set of hosts"
HEADERS = ["spec", "hosts", "answer"]


def shown(report: Report) -> bool:
    return bool(asked_imports(report.run))


def body(report: Report) -> str | None:
    asked = asked_imports(report.run)
    if not asked:
        return None
    rows = [
        row([f"<code>{esc(spec.spec)}</code>", esc(answer.hosts), esc(answer.text())])
        for spec in asked
        for answer in spec.answers
    ]
    return table(HEADERS, rows)
