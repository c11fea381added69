"""The answer to `--import` in the terminal report (`fleet probe`, `fleet show`): a section of
its own, each spec asked, then per set of hosts that answered alike the name that resolved and
its package's version, or what was tried when nothing resolved (fleet/units/imports/answers.py).
A run that asked only the default specs has no section: the key facts say SymmetricMemory."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.models import Run
from fleet.render.terminal.wrap import Hanging
from fleet.units.imports.answers import asked_imports

MAX_SETS = 4  # host sets shown per spec; the rest are counted (the JSON has every host)


def view(run: Run, diff: FleetDiff) -> Group | None:
    asked = asked_imports(run)
    if not asked:
        return None
    lines: list[Text | Hanging] = [Text("imports", style="italic")]
    for spec in asked:
        lines.append(Hanging(Text("  "), Text(spec.spec, style="bold"), 4))
        for answer in spec.answers[:MAX_SETS]:
            style = "red" if answer.resolved is None else ""
            lines.append(Hanging(Text(f"    {answer.hosts}:"), Text(answer.text(), style), 6))
        hidden = spec.answers[MAX_SETS:]
        if hidden:
            hosts = sum(answer.count for answer in hidden)
            more = f"    … {len(hidden)} more answers on {hosts} host(s): --json has each host's"
            lines.append(Text(more, style="dim"))
    return Group(*lines)
