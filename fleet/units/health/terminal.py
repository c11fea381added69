"""The health probe in the terminal: only what matters, one line per finding with the hosts that
share it folded (`gpu-[001-998]`): GPUs with faults, GPUs on the PCI bus that nvidia-smi does
not list, a fabric manager that does not run, counters that rose during a sample (`--sample`),
and the clock-event reasons the GPUs spent time in while sampled (SW power cap under load is
how a GPU at its power limit runs: said, not flagged). Nothing to say: no section, never an
empty table. The verdicts stay in the checks section."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.table import Table

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import Run
from fleet.units.health.html import gpu_cell

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
    table = Table(title="GPU health: what matters", title_justify="left", expand=False)
    table.add_column("hosts", overflow="fold", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for (what, finding), hosts in hosts_of.items():
        table.add_row(compact_hosts(hosts), what, finding)
    return table


def health_lines(data: Mapping[str, Any]) -> Iterator[Line]:
    """What matters on one host, in the order an operator acts on it."""
    for gpu in data.get("gpus") or []:
        text, off = gpu_cell(gpu)
        if off:
            yield "GPU fault", f"{gpu.get('gpu')}: {text}"
    missing = (data.get("pci_bus") or {}).get("missing_from_nvidia_smi") or []
    if missing:
        yield "GPU off the bus", f"{', '.join(missing)}: on the PCI bus, not in nvidia-smi"
    manager = data.get("fabric_manager") or {}
    if manager.get("running") is False:
        yield "fabric manager", f"not running: service {manager.get('service')}, port 6666 closed"
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
