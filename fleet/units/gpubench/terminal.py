"""The gpubench probe in the terminal: only what is off (slow GPUs and pairs, PCIe links and
clocks under load, figures not measured, a stop at the budget), one line per finding; a run where
nothing is off gets one line saying what was measured. Scores: fleet/units/gpubench/facts.py."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.models import Run
from fleet.units.gpubench import facts as gpubench


def view(run: Run, diff: FleetDiff) -> Table | Text | None:
    return gpubench_view(run)


def gpubench_view(run: Run) -> Table | Text | None:
    """None when no host has gpubench results."""
    benches = {
        name: outcome.probes["gpubench"].data
        for name, outcome in run.hosts.items()
        if "gpubench" in outcome.probes and outcome.probes["gpubench"].status == "ok"
    }
    if not benches:
        return None
    medians = gpubench.cohort_medians(benches.values())
    sizes = gpubench.cohort_sizes(benches.values())
    rows = []
    gpus = 0
    for host, data in benches.items():
        summary = gpubench.summary(data, cohort=medians, cohort_size=sizes)
        gpus += summary["gpu_count"]
        rows += [(host, line) for line in gpubench.off(summary)]
    if not rows:
        return Text(
            f"gpubench: {gpus} GPU(s) on {len(benches)} host(s), nothing off (GPUs within "
            f"{gpubench.DEFAULT_GPU_TOLERANCE:.0%} of the best on their host, pairs within "
            f"{gpubench.DEFAULT_PAIR_TOLERANCE:.0%} of the median pair)",
            style="dim",
        )
    table = Table(title="gpubench: what is off", title_justify="left", expand=False)
    table.add_column("host", overflow="fold", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for host, line in rows:
        table.add_row(host, line)
    return table
