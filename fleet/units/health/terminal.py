"""The health probe in the terminal: what a sample (`--sample SECONDS`) saw, one line per
finding with the hosts that share it folded (`gpu-[001-998]`): counters that rose while sampled,
the time the GPUs spent in each clock-event reason (SW power cap under load is how a GPU at its
power limit runs: said, not flagged; HW reasons are "clocks held"), and sources that could not be
read twice. GPUs with faults, GPUs off the bus and a fabric manager down are the rules' findings,
which the report leads with: not said twice. Nothing to say: no section, never an empty table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import Run
from fleet.render.grouping import CLOCK_EVENT_WORDS
from fleet.render.terminal.wrap import Hanging

Line = tuple[str, str]  # (what, the line)


MAX_HOST_LINES = 4  # hosts, up to which each gets its line of what its GPUs read


def view(run: Run, diff: FleetDiff) -> Group | None:
    """What the GPUs read (a line per host on small runs, one line for the fleet), then what a
    sample saw. None when no host ran the health probe."""
    read = gpus_read(run)
    sampled = health_view(run)
    parts = [part for part in (read, sampled) if part is not None]
    return Group(*parts) if parts else None


def gpus_read(run: Run) -> Text | Group | None:
    """`health: local 1× NVIDIA H200: ECC on · 0 uncorrected · no remap pending · PCIe 5 x16 ·
    33 °C · 80/700 W · idle · no Xid` — what `-p health` read, said even when nothing is wrong."""
    healthy = {
        name: outcome.probes["health"].data
        for name, outcome in run.hosts.items()
        if "health" in outcome.probes and outcome.probes["health"].ok
    }
    if not healthy:
        return None
    if len(run.hosts) > MAX_HOST_LINES:  # a fleet: one line (its faults are findings)
        gpus = sum(len(data.get("gpus") or []) for data in healthy.values())
        return Text(
            f"health: {gpus} GPU(s) on {len(healthy)} host(s) read; what is wrong is in the"
            " findings above",
            style="dim",
        )
    lines: list[Text | Hanging] = [Text("health:", style="bold")]
    lines += [
        Hanging(Text(f"  {name} "), Text(host_health_line(data)), 4)
        for name, data in healthy.items()
    ]
    return Group(*lines)


def host_health_line(data: Mapping[str, Any]) -> str:
    gpus = [gpu for gpu in data.get("gpus") or [] if isinstance(gpu, Mapping)]
    if not gpus:
        return f"no GPU read ({data.get('nvidia_smi_error') or 'nvidia-smi listed none'})"
    names = sorted({str(gpu.get("name")) for gpu in gpus})
    facts = [
        _ecc(gpus),
        _remaps(gpus),
        _pcie(gpus),
        f"{max(int((g.get('temperature') or {}).get('gpu_c') or 0) for g in gpus)} °C max",
        _power(gpus),
        _clocks(gpus),
        _xids(data),
    ]
    return f"{len(gpus)}× {', '.join(names)}: " + " · ".join(f for f in facts if f)


def _ecc(gpus: list[Mapping[str, Any]]) -> str:
    modes = {str((g.get("ecc") or {}).get("mode")) for g in gpus}
    uncorrected = sum(
        int(((g.get("ecc") or {}).get("volatile") or {}).get("uncorrected") or 0) for g in gpus
    )
    return f"ECC {'/'.join(sorted(modes))}, {uncorrected} uncorrected"


def _remaps(gpus: list[Mapping[str, Any]]) -> str:
    pending = sum(1 for g in gpus if (g.get("remapped_rows") or {}).get("pending"))
    return f"{pending} GPU(s) with a remap pending" if pending else "no remap pending"


def _pcie(gpus: list[Mapping[str, Any]]) -> str:
    links = sorted(
        {f"{(g.get('pcie') or {}).get('gen')} x{(g.get('pcie') or {}).get('width')}" for g in gpus}
    )
    return f"PCIe {', '.join(links)}"


def _power(gpus: list[Mapping[str, Any]]) -> str:
    draws = [float((g.get("power") or {}).get("draw_w") or 0) for g in gpus]
    limit = max(float((g.get("power") or {}).get("limit_w") or 0) for g in gpus)
    return f"{max(draws):.0f}/{limit:.0f} W max" if limit else ""


def _clocks(gpus: list[Mapping[str, Any]]) -> str:
    active = sorted({r for g in gpus for r in (g.get("clock_events") or {}).get("active") or []})
    words = [CLOCK_EVENT_WORDS.get(reason, reason) for reason in active]
    return "clocks: " + (", ".join(words) if words else "no event")


def _xids(data: Mapping[str, Any]) -> str:
    log = data.get("kernel_log") or {}
    xids = sorted({str(x.get("xid")) for x in log.get("xids") or [] if isinstance(x, Mapping)})
    if log.get("source") is None and not xids:
        return "kernel log not read"
    return f"Xid {', '.join(xids)} in the kernel log" if xids else "no Xid"


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
