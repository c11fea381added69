"""The gpubench probe in the terminal: only what is off (slow GPUs and pairs, PCIe links and
clocks under load, figures not measured, a stop at the budget), one line per finding; a run where
nothing is off gets one line saying what was measured. Scores: fleet/units/gpubench/facts.py."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import ProbeResult, Run
from fleet.render.grouping import CLOCK_EVENT_WORDS
from fleet.render.terminal.wrap import Hanging
from fleet.units.gpubench import facts as gpubench

MAX_GPU_LINES = 8  # GPUs in all, up to which each gets its line when nothing is off


def gpu_line(gpu: dict[str, Any]) -> str:
    """`GPU0: bf16 690 TFLOPS · copy 4166 GB/s · h2d/d2h 55/55 GB/s · under load: sw_power_cap,
    SM 1365–1980 MHz, 708 W` — what a GPU measured and how it ran."""
    parts = [f"GPU{gpu.get('index')}:"]
    best = _best_tflops(gpu.get("matmul") or {})
    if best:
        parts.append(best)
    rates = gpu.get("gbps") or {}
    if "memcpy" in rates:
        parts.append(f"· copy {rates['memcpy']:g} GB/s")
    if "h2d" in rates and "d2h" in rates:
        parts.append(f"· h2d/d2h {rates['h2d']:g}/{rates['d2h']:g} GB/s")
    load = gpu.get("load") or {}
    if load:
        named = [CLOCK_EVENT_WORDS.get(e, e) for e in load.get("clock_events") or []]
        events = ", ".join(named) or "no clock events"
        clocks = f"SM {load.get('sm_mhz_min')}–{load.get('sm_mhz_max')} MHz"
        power = f", {load['power_w_max']:g} W" if load.get("power_w_max") else ""
        parts.append(f"· under load: {events}, {clocks}{power}")
    return " ".join(parts)


def _best_tflops(matmul: dict[str, Any]) -> str:
    for dtype, short in (("bfloat16", "bf16"), ("float16", "fp16")):
        shapes = (matmul.get(dtype) or {}).get("shapes") or {}
        best = max((s.get("tflops") or 0 for s in shapes.values()), default=0)
        if best:
            return f"{short} {best:g} TFLOPS"
    return ""


def view(run: Run, diff: FleetDiff) -> Table | Text | Group | None:
    return gpubench_view(run)


def gpubench_view(run: Run) -> Table | Text | Group | None:
    """None when no host has gpubench results."""
    ran = {n: o.probes["gpubench"] for n, o in run.hosts.items() if "gpubench" in o.probes}
    benches = {name: result.data for name, result in ran.items() if result.ok}
    not_measured = _not_measured({n: r for n, r in ran.items() if not r.ok})
    if not benches:
        return not_measured
    if not_measured is not None:
        return Group(_benches_view(benches, gpubench), not_measured)
    return _benches_view(benches, gpubench)


def _not_measured(results: dict[str, ProbeResult]) -> Text | None:
    """Hosts where gpubench measured nothing, and why, said once per reason: nothing measured
    never reads as healthy."""
    if not results:
        return None
    reasons: dict[str, list[str]] = {}
    for host, result in results.items():
        reasons.setdefault(result.error or result.status, []).append(host)
    text = Text("gpubench measured nothing", style="yellow")
    for reason, hosts in reasons.items():
        text.append(f"\n  on {compact_hosts(hosts)}: {reason}")
    return text


def _benches_view(benches: dict[str, Any], gpubench: Any) -> Table | Text | Group:
    medians = gpubench.cohort_medians(benches.values())
    sizes = gpubench.cohort_sizes(benches.values())
    rows = []
    gpus = 0
    for host, data in benches.items():
        summary = gpubench.summary(data, cohort=medians, cohort_size=sizes)
        gpus += summary["gpu_count"]
        rows += [(host, line) for line in gpubench.off(summary)]
    if not rows:
        text = Text(
            f"gpubench: {gpus} GPU(s) on {len(benches)} host(s), nothing off (GPUs within "
            f"{gpubench.DEFAULT_GPU_TOLERANCE:.0%} of the best on their host, pairs within "
            f"{gpubench.DEFAULT_PAIR_TOLERANCE:.0%} of the median pair)",
            style="dim",
        )
        if gpus > MAX_GPU_LINES:
            return text
        lines: list[Text | Hanging] = [text]  # a few GPUs: each one's figures, clocks under load
        for host, data in benches.items():
            for gpu in data.get("gpus") or []:
                lines.append(Hanging(Text(f"  {host} "), Text(gpu_line(gpu)), 4))
        return Group(*lines)
    table = Table(title="gpubench: what is off", title_justify="left", expand=False)
    table.add_column("host", overflow="fold", no_wrap=True)
    table.add_column("finding", overflow="fold")
    for host, line in rows:
        table.add_row(host, line)
    return table
