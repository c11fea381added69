"""The allreduce probe in the terminal: the allreduce matrix per cohort (which variant wins each
size band and mode, which failed where); under `fleet check`'s verdict, bus bandwidth against the
hardware's line rate (`checked_view`)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.analysis.baselines.judge import number
from fleet.analysis.facts import human_bytes
from fleet.findings.assessment import Assessment
from fleet.hostsets import count_hosts
from fleet.models import Run
from fleet.units.allreduce.linerate import CohortLineRate
from fleet.units.allreduce.matrix import CohortMatrix, cohort_matrices, size_order


def view(run: Run, diff: FleetDiff) -> Table | None:
    return allreduce_matrix_table(run, diff)


def allreduce_matrix_table(run: Run, diff: FleetDiff) -> Table | None:
    """Per cohort: the winning allreduce per size band and mode, and which variants failed where."""
    cohorts = [(c.name, [run.hosts[h] for h in c.hosts if h in run.hosts]) for c in diff.cohorts]
    summaries = cohort_matrices(cohorts)
    if not summaries:
        return None
    table = Table(title="allreduce matrix", title_justify="left", expand=False)
    for column in ("cohort", "winner eager", "winner graph", "failed (hosts)"):
        table.add_column(column, overflow="fold")
    for summary in summaries:
        hosts = f"{summary.cohort} ({summary.hosts})"
        if summary.stopped_early:
            hosts += f"\n{summary.stopped_early} stopped early"
        cells = [_winner_bands(summary, mode) for mode in ("eager", "graph")]
        table.add_row(hosts, *cells, _matrix_failures(summary))
    return table


def _winner_bands(summary: CohortMatrix, mode: str) -> str:
    """Consecutive sizes with the same winner(s) fold into one band: '8 B–64 KiB Ring/LL'."""
    by_size = summary.winners.get(mode) or {}
    bands: list[tuple[str, str, str]] = []
    for size in sorted(by_size, key=size_order):
        who = ", ".join(f"{v}" if n == summary.hosts else f"{v} ×{n}" for v, n in by_size[size][:2])
        if bands and bands[-1][2] == who:
            bands[-1] = (bands[-1][0], size, who)
        else:
            bands.append((size, size, who))
    lines = [f"{a}–{b} {who}" if a != b else f"{a} {who}" for a, b, who in bands]
    return "\n".join(lines) or "—"


def _matrix_failures(summary: CohortMatrix) -> str:
    by_variant: dict[str, list[str]] = {}
    for variant, where, hosts in summary.failures:
        by_variant.setdefault(variant, []).append(f"{where} ({hosts})")
    return "\n".join(f"{v}: {', '.join(w)}" for v, w in by_variant.items()) or "none"


# ------------------------------------------------------------------ line rates (`fleet check`)


def checked_view(assessment: Assessment) -> str | None:
    """Per cohort: its line rate, and per mode the bus bandwidth at the largest size as a share of
    it (the cohort's median, and its lowest host when that differs). None: no line rates."""
    rates = [rate for rate in assessment.line_rates if isinstance(rate, CohortLineRate)]
    if not rates:
        return None
    lines = [
        "",
        "[bold]bus bandwidth against line rate[/] [dim](from the hardware: no baseline needed)[/]",
    ]
    for cohort in rates:
        lines += _cohort_lines(cohort)
    return "\n".join(lines)


def _cohort_lines(cohort: CohortLineRate) -> list[str]:
    rate = cohort.rate
    if rate is None:
        why = next((h.why_not for h in cohort.hosts if h.why_not), "not known")
        return [f"  {escape(cohort.cohort)}: line rate not known: {escape(why)}"]
    lines = [
        f"  {escape(cohort.cohort)} [dim]({count_hosts(len(cohort.hosts))})[/]: line rate "
        f"{rate.gbps:g} GB/s per direction [dim]({escape(rate.basis)})[/]"
    ]
    lines += [line for mode in cohort.modes() if (line := _mode_line(cohort, mode))]
    choices = sorted({h.nccl_choice for h in cohort.hosts})
    return lines + [f"    [dim]{escape(choice)}[/]" for choice in choices[:2]]


def _mode_line(cohort: CohortLineRate, mode: str) -> str:
    percent = cohort.median_percent(mode)
    lowest = cohort.lowest(mode)
    if percent is None or lowest is None:
        return ""
    size, value = lowest.busbw[mode]
    text = f"    {mode} {human_bytes(size)}: {_share(percent)} of line rate" + (
        " (median)" if len(cohort.hosts) > 1 else f", {number(value)} GB/s"
    )
    if len(cohort.hosts) > 1:
        low = lowest.percent(mode) or 0.0
        text += f"; lowest {escape(lowest.host)} {_share(low)} ({number(value)} GB/s)"
    return text


def _share(percent: float) -> str:
    return f"{percent:.0f}%"
