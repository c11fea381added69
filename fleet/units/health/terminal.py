"""The health probe in the terminal: what a sample (`--sample SECONDS`) saw, one line per
finding with the hosts that share it folded (`gpu-[001-998]`): counters that rose while sampled,
the time the GPUs spent in each clock-event reason (SW power cap under load is how a GPU at its
power limit runs: said, not flagged; HW reasons are "clocks held"), and sources that could not be
read twice. GPUs with faults, GPUs off the bus and a fabric manager down are the rules' findings,
which the report leads with: not said twice. Nothing to say: no section, never an empty table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.table import Table

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import Run

Line = tuple[str, str]  # (what, the line)


def view(run: Run, diff: FleetDiff) -> Table | None:
    return health_view(run)


def health_view(run: Run) -> Table | None:
    """None when no host's health has anything to say."""
    hosts_of: dict[Line, list[str]] = {}
    for name, outcome in run.hosts.items():
        result = outcome.probes.get("health")
        if result is None or not result.ok or not isinstance(result.data, Mapping):
            continue
        for line in dict.fromkeys(health_lines(result.data)):
            hosts_of.setdefault(line, []).append(name)
    if not hosts_of:
        return None
    table = Table(title="GPU health: what the sample saw", title_justify="left", expand=False)
    table.add_column("hosts", overflow="fold", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for (what, finding), hosts in hosts_of.items():
        table.add_row(compact_hosts(hosts), what, finding)
    return table


def health_lines(data: Mapping[str, Any]) -> Iterator[Line]:
    """What a sample saw on one host (nothing without a sample)."""
    yield from sample_lines(data.get("sample"))


def sample_lines(sample: Mapping[str, Any] | None) -> Iterator[Line]:
    """Counters that rose while sampled, and the time spent in each clock-event reason."""
    if not sample or sample.get("seconds") is None:
        return
    seconds = float(sample["seconds"])
    for row in sample.get("counters") or []:
        if not row.get("delta"):
            continue
        where = " ".join(str(part) for part in (row["device"], row.get("port")) if part)
        if row["kind"] == "clock_events":
            share = row["delta"] / 1e6 / seconds if seconds else 0.0
            what = "clocks held (HW)" if row["counter"].startswith("hw_") else "clock events"
            yield what, f"{where}: {row['counter']} {share:.0%} of {seconds:g} s"
        else:
            rate = row.get("per_hour")
            yield "rose", f"{where}: {row['kind']} {row['counter']} +{row['delta']} ({rate:g}/h)"
    unreadable = sample.get("unreadable") or []
    if unreadable:
        yield "not sampled", ", ".join(unreadable) + ": not read twice"
