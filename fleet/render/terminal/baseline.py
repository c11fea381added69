"""The terminal views of baselines: a baseline file shown (`fleet baseline --show`), the hosts that
fell outside its bands (one line per measurement: versions that changed, the baseline's median →
the host's value, the band's end). Bus bandwidth against the hardware's line rate is the allreduce
unit's (fleet/units/allreduce/terminal.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from fleet.analysis.across_runs.bands import Band
from fleet.analysis.across_runs.measured import Key
from fleet.analysis.baselines.build import Baseline
from fleet.analysis.baselines.identity import VERSION_LABELS, VERSIONS
from fleet.analysis.baselines.judge import number
from fleet.analysis.facts import higher_is_better
from fleet.checks import RuleVerdict, format_value
from fleet.hostsets import compact_hosts, count_hosts

MAX_LINES = 6  # measurements shown per group of hosts; the JSON document has every one
SHOWN_PER_FAMILY = 12  # measurements `--show` lists per family and cohort without --all


def print_measurement_failures(console: Console, verdicts: list[RuleVerdict]) -> None:
    """Hosts that failed a baseline rule alike: each measurement outside its band on one line."""
    first = verdicts[0]
    names = escape(compact_hosts(v.host for v in verdicts))
    lines = first.observed if isinstance(first.observed, list) else [format_value(first.observed)]
    cohort = f" [dim]({escape(str(first.cohort))})[/]" if first.cohort else ""
    for line in lines[:MAX_LINES]:
        console.print(f"    [red]{names}[/]{cohort}: {escape(str(line))}")
    if len(lines) > MAX_LINES:
        console.print(
            f"      … and {len(lines) - MAX_LINES} more outside their bands "
            "(--json - lists every one)"
        )
    if first.reason:
        console.print(f"      [dim]{escape(first.reason)}[/]")
    if first.fix:
        console.print(f"      [bold]fix:[/] {escape(first.fix)}")


def render_baseline(console: Console, baseline: Baseline, every: bool = False) -> None:
    """A baseline as a person reads it: what it was made from and on, then per cohort its bands
    (the first SHOWN_PER_FAMILY per family unless `every`)."""
    where = baseline.path or "baseline"
    console.print(
        f"[bold]{escape(where)}[/] [dim]· fleet.baseline/1 · made by fleet "
        f"{escape(baseline.fleet_version)} at {escape(baseline.created)}[/]"
    )
    console.print(
        f"  band: median ± max({baseline.floor:.0%} of the median, min({baseline.k:g} × 1.4826 × "
        f"MAD, farthest run + {baseline.floor:.0%} of the median)); judged on the worse side "
        "(latency above, bus bandwidth below)"
    )
    if baseline.cohort_by:
        console.print(f"  cohorts by: {escape(baseline.cohort_by)}")
    console.print(f"  made from {len(baseline.runs)} run(s):")
    for made in baseline.runs:
        console.print(
            f"    {escape(made.location)} [dim]· started {escape(made.started)} · "
            f"{made.hosts} host(s) measured · fleet {escape(made.fleet_version)}[/]"
        )
    for cohort in baseline.cohorts.values():
        console.print()
        hosts = compact_hosts(cohort.hosts) if cohort.hosts else "?"
        console.print(
            f"[bold]{escape(cohort.name)}[/] [dim]· {count_hosts(len(cohort.hosts))}: "
            f"{escape(hosts)} · {cohort.runs} run(s)[/]"
        )
        versions = " · ".join(
            f"{VERSION_LABELS[v]} {'/'.join(cohort.versions.get(v, ())) or '?'}" for v in VERSIONS
        )
        console.print(f"  made on: {escape(versions)}")
        _print_bands(console, list(cohort.bands.items()), every)


def _print_bands(console: Console, bands: Sequence[tuple[Key, Band]], every: bool) -> None:
    families: dict[str, list[tuple[Key, Band]]] = {}
    for key, band in bands:
        families.setdefault(key.family, []).append((key, band))
    for family, found in families.items():
        shown = found if every else found[:SHOWN_PER_FAMILY]
        console.print(
            f"  [bold]{family}[/] [dim]({len(found)} measurement(s): median, the judged end "
            "of the band, values)[/]"
        )
        width = min(max(len(key.short) for key, _ in shown), 40)
        for key, band in shown:
            end = band.low if higher_is_better(key.metric) else band.high
            judged = f"{'≥' if higher_is_better(key.metric) else '≤'} {number(end)}"
            console.print(
                f"    {escape(key.short):<{width}} {number(band.median):>7} {key.unit:<4} "
                f"{judged:<9} [dim]n={band.samples}[/]"
            )
        if len(found) > len(shown):
            console.print(f"    [dim]… {len(found) - len(shown)} more (--all lists them)[/]")
