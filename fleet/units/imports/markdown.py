"""The answer to `--import` in Markdown (`fleet diff RUN --format markdown`): each spec asked,
then per set of hosts that answered alike the name that resolved and its version, or what was
tried when nothing resolved; as the terminal says it (fleet/units/imports/answers.py)."""

from __future__ import annotations

from fleet.models import Run
from fleet.render.documents import md_code, md_text
from fleet.units.imports.answers import asked_imports


def lines(run: Run) -> list[str]:
    asked = asked_imports(run)
    if not asked:
        return []
    said = ["## fleet: imports asked (--import)", ""]
    for spec in asked:
        said.append(f"- {md_code(spec.spec)}")
        said += [f"  - {md_text(a.hosts)}: {md_text(a.text())}" for a in spec.answers]
    return [*said, ""]
