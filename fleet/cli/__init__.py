"""The `fleet` command: click commands over fleet.api, one module per command or family.

    root.py       the group: the one error boundary, --debug, which module holds each command
    exits.py      the exit codes (a bitmask) and how a run sets them
    options.py    the options several commands take, each declared once; selection.py: -H & co.
    probing.py    what probe and check share: their options, probing with progress, --json/--html
    hosts.py      fleet hosts, fleet probes            probe.py    fleet probe
    runs.py       fleet diff, fleet show, fleet runs    check.py    fleet check    (first use)
    report.py     fleet report, --openmetrics           fabric.py   fleet fabric   (first use)
    completion.py shell completion of probes, runs and hosts

It imports only fleet.api, fleet.errors, fleet.models, fleet.render and itself
(tests/unit/test_layout.py); it prints and exits, the API below it does neither.
"""

from fleet.cli.root import entry, main

__all__ = ["entry", "main"]
