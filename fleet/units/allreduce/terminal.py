"""The allreduce probe in the terminal: the allreduce matrix per cohort (which variant wins each
size band and mode, which failed where)."""

from __future__ import annotations

from rich.table import Table

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.models import Run
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
