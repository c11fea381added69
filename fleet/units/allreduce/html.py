"""The allreduce probe on the HTML page: curves per cohort: latency and bus bandwidth against message size.

One line per host, the cohort median drawn bold, hosts beyond tolerance (the cross-host diff's
outliers, fleet/analysis/across_hosts/diff.py) coloured and named in the legend; eager and CUDA-graph modes side
by side. Above MAX_LINES hosts a cohort's hosts within tolerance become one shaded band (lowest to
highest at each size) so the chart stays readable and small, and the page says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from fleet.analysis.across_hosts.diff import Cohort, FleetDiff, Outlier
from fleet.analysis.baselines.build import BaselineCohort
from fleet.analysis.facts import median
from fleet.hostsets import compact_hosts
from fleet.models import HostOutcome
from fleet.render.html.svg import BandArea, Point, Series, byte_ticks, log_chart
from fleet.units.allreduce.linerate import CohortLineRate, host_line_rate

if TYPE_CHECKING:
    from fleet.render.html.page import Report

MAX_LINES = 64  # hosts drawn one line each; above, a band
MAX_NAMED = 6  # odd hosts with their own colour (Okabe-Ito has 7 besides the median's blue)
MODE_LABELS = {"eager": "eager", "graph": "CUDA graph"}
METRICS = (("latency_us", "latency (µs)"), ("busbw_gbps", "bus bandwidth (GB/s)"))

# The page's section (fleet.render.html.page): always there, saying so when no host has data.
ANCHOR = "allreduce"
NAV = "allreduce"
TITLE = "allreduce per cohort"
INTRO = "latency and bus bandwidth against message size, log axes; one line per host"


def shown(report: Report) -> bool:
    return True


def body(report: Report) -> str:
    judged = report.baseline
    bands = {h.host: h.cohort for h in judged.hosts if h.cohort} if judged else None
    curves = curves_section(report.run.hosts, report.diff, bands)
    return curves or '<p class="dim">no allreduce data in this run</p>'


# host → mode → metric → [(bytes, value)] by size
Lines = dict[str, dict[str, tuple[Point, ...]]]
Curves = dict[str, Lines]


@dataclass(frozen=True)
class CohortCurves:
    cohort: Cohort
    curves: Curves
    outliers: tuple[Outlier, ...]
    baseline: BaselineCohort | None = None  # the baseline's cohort, its bands drawn behind
    rate: CohortLineRate | None = None  # the hardware's line rate, said over the charts

    @property
    def modes(self) -> list[str]:
        found = {m for per_mode in self.curves.values() for m in per_mode}
        order = list(MODE_LABELS)  # eager first, then CUDA graph, then anything newer
        return sorted(found, key=lambda m: (order.index(m) if m in order else len(order), m))

    @property
    def named(self) -> dict[str, int]:
        """Odd hosts → their colour index (0…MAX_NAMED-1); the rest share the last class."""
        hosts = sorted({o.host for o in self.outliers})
        return {h: min(i, MAX_NAMED) for i, h in enumerate(hosts)}


def allreduce_lines(outcome: HostOutcome) -> Lines:
    """mode → metric → points by size, from whatever rows the probe returned (also partial ones).
    One pass over the rows: at 1,000 hosts this is most of the charts' cost."""
    result = outcome.probes.get("allreduce")
    rows = result.data.get("results") if result is not None else None
    found: dict[str, dict[str, list[Point]]] = {}
    for row in rows if isinstance(rows, list) else []:
        size = row.get("bytes") if isinstance(row, dict) else None
        if type(size) is not int or size <= 0:  # bool and float sizes are not sizes
            continue
        mode = str(row.get("mode", "?"))
        per_metric = found.get(mode)
        if per_metric is None:  # (made once per mode, not once per row)
            per_metric = found[mode] = {m: [] for m, _ in METRICS}
        at = float(size)
        for metric, points in per_metric.items():
            value = row.get(metric)
            if type(value) is float or type(value) is int:
                points.append((at, float(value)))
    return {mode: {m: tuple(sorted(p)) for m, p in lines.items()} for mode, lines in found.items()}


def cohort_curves(
    outcomes: Mapping[str, HostOutcome],
    diff: FleetDiff,
    baseline: Mapping[str, BaselineCohort] | None = None,
) -> list[CohortCurves]:
    """Per cohort with allreduce data its hosts' curves; `baseline`: each host's cohort in a
    baseline the run was judged against."""
    found = []
    for cohort in diff.cohorts:
        curves = {h: allreduce_lines(outcomes[h]) for h in cohort.hosts if h in outcomes}
        curves = {h: c for h, c in curves.items() if c}
        if curves:
            outliers = tuple(
                o
                for o in diff.outliers
                if o.cohort == cohort.name and o.measure.startswith("allreduce")
            )
            judged = baseline or {}
            bands = next((judged[h] for h in cohort.hosts if h in judged), None)
            rates = tuple(r for r in (host_line_rate(outcomes[h]) for h in curves) if r)
            rate = CohortLineRate(cohort.name, rates) if rates else None
            found.append(CohortCurves(cohort, curves, outliers, bands, rate))
    return found


# ------------------------------------------------------------------------------------ drawing


def curves_section(
    outcomes: Mapping[str, HostOutcome],
    diff: FleetDiff,
    baseline: Mapping[str, BaselineCohort] | None = None,
) -> str:
    cohorts = cohort_curves(outcomes, diff, baseline)
    if not cohorts:
        return ""
    return "".join(_cohort_html(c, diff.tolerance) for c in cohorts)


def _cohort_html(cohort: CohortCurves, tolerance: float) -> str:
    hosts = sorted(cohort.curves)
    head = (
        f'<h3>{escape(cohort.cohort.name)} <span class="dim">· {len(hosts)} host(s) with '
        f"allreduce data: {escape(compact_hosts(hosts))}</span></h3>"
    )
    note = ""
    if len(hosts) > MAX_LINES:
        note = (
            f'<p class="note">{len(hosts)} hosts: the hosts within tolerance are drawn as one '
            "shaded band (lowest to highest at each size), the hosts beyond it as lines.</p>"
        )
    columns = []
    for mode in cohort.modes:
        charts = "".join(_chart(cohort, mode, metric, label) for metric, label in METRICS)
        columns.append(
            f'<figure class="mode" aria-label="{escape(MODE_LABELS.get(mode, mode))}">{charts}</figure>'
        )
    body = f'<div class="charts">{"".join(columns)}</div>'
    return (
        f'<div class="cohort">{head}{_line_rate(cohort.rate)}{note}{body}{_legend(cohort, tolerance)}'
        f"{_outlier_table(cohort.outliers)}</div>"
    )


def _chart(cohort: CohortCurves, mode: str, metric: str, label: str) -> str:
    odd = {o.host for o in cohort.outliers if o.measure.startswith(f"allreduce {mode} ")}
    named = cohort.named
    lines = {h: per_mode[mode][metric] for h, per_mode in cohort.curves.items() if mode in per_mode}
    lines = {h: p for h, p in lines.items() if p}
    series: list[Series] = []
    band = None
    plain = sorted(h for h in lines if h not in odd)
    values = _by_size(lines, plain)
    if len(lines) > MAX_LINES:
        band = _band(values, len(plain))
    else:
        series += [Series(h, lines[h], "host") for h in plain]
    if len(lines) > 1:
        for size, value in (p for h in odd if h in lines for p in lines[h]):
            values[size].append(value)  # the median is over every host, the odd ones too
        series.append(Series(f"cohort median ({len(lines)} hosts)", _median(values), "median"))
    series += [Series(h, lines[h], f"odd odd-{named.get(h, MAX_NAMED)}") for h in sorted(odd)]
    title = f"{MODE_LABELS.get(mode, mode)} · {label.split(' (')[0]}"
    backdrop = _baseline_band(cohort.baseline, mode, metric)
    return log_chart(
        title, "message size", label, series, band, x_ticks=byte_ticks, backdrop=backdrop
    )


def _baseline_band(baseline: BaselineCohort | None, mode: str, metric: str) -> BandArea | None:
    """The baseline's bands of this mode and metric as one shaded range: latency below 1 MiB,
    bus bandwidth from 1 MiB up (the sizes each is judged at)."""
    if baseline is None:
        return None
    found = sorted(
        (key.size, band)
        for key, band in baseline.bands.items()
        if key.family == "allreduce" and key.mode == mode and key.metric == metric
    )
    if not found:
        return None
    return BandArea(
        f"baseline band of {baseline.name} (median ± k·MAD within the runs' spread, floor at least, {found[0][1].samples}+ values)",
        tuple((float(size), band.low) for size, band in found),
        tuple((float(size), band.high) for size, band in found),
    )


def _line_rate(rate: CohortLineRate | None) -> str:
    """One line over the charts: bus bandwidth at the largest size as a share of line rate."""
    if rate is None:
        return ""
    line = rate.rate
    if line is None:
        why = next((h.why_not for h in rate.hosts if h.why_not), "not known")
        return f'<p class="dim">line rate not known: {escape(why)}</p>'
    shares = []
    for mode in rate.modes():
        percent = rate.median_percent(mode)
        if percent is not None:
            shares.append(f"{escape(MODE_LABELS.get(mode, mode))} {percent:.0f}%")
    choice = escape(rate.hosts[0].nccl_choice)
    return (
        f'<p class="linerate">bus bandwidth at the largest size: {", ".join(shares)} of the line '
        f"rate, {line.gbps:g} GB/s per direction ({escape(line.basis)}) · {choice}</p>"
    )


def _by_size(
    lines: Mapping[str, tuple[Point, ...]], hosts: Sequence[str]
) -> dict[float, list[float]]:
    values: dict[float, list[float]] = defaultdict(list)
    for host in hosts:
        for size, value in lines[host]:
            values[size].append(value)
    return values


def _median(values: Mapping[float, list[float]]) -> tuple[Point, ...]:
    return tuple((size, median(found)) for size, found in sorted(values.items()))


def _band(values: Mapping[float, list[float]], hosts: int) -> BandArea | None:
    if not values:
        return None
    sizes = sorted(values)
    return BandArea(
        f"{hosts} hosts within tolerance: lowest to highest",
        tuple((s, min(values[s])) for s in sizes),
        tuple((s, max(values[s])) for s in sizes),
    )


def _legend(cohort: CohortCurves, tolerance: float) -> str:
    within = (
        '<span class="swatch band"></span>hosts within tolerance (lowest to highest)'
        if len(cohort.curves) > MAX_LINES
        else '<span class="swatch host"></span>a host within tolerance'
    )
    items = ['<li><span class="swatch median"></span>cohort median</li>', f"<li>{within}</li>"]
    if cohort.baseline is not None:
        items.append(
            '<li><span class="swatch band baseline"></span>the baseline\'s band '
            "(latency below 1 MiB, bus bandwidth from 1 MiB)</li>"
        )
    named = cohort.named
    worst: dict[str, Outlier] = {}
    for outlier in cohort.outliers:
        if outlier.host not in worst or outlier.factor > worst[outlier.host].factor:
            worst[outlier.host] = outlier
    shown = [h for h, i in named.items() if i < MAX_NAMED]
    for host in shown:
        o = worst[host]
        items.append(
            f'<li class="odd-host"><span class="swatch odd odd-{named[host]}"></span>'
            f"<b>{escape(host)}</b> {o.factor:g}× worse: {escape(o.measure)}</li>"
        )
    rest = [h for h in named if h not in shown]
    if rest:
        items.append(
            f'<li><span class="swatch odd odd-{MAX_NAMED}"></span>{len(rest)} more beyond '
            f"tolerance: {escape(compact_hosts(rest))} (see the table)</li>"
        )
    caption = f"beyond tolerance: worse than the cohort median by more than {tolerance:.0%}"
    return f'<ul class="legend">{"".join(items)}</ul><p class="dim">{escape(caption)}</p>'


def _outlier_table(outliers: Sequence[Outlier]) -> str:
    if not outliers:
        return '<p class="ok">every host of this cohort is within tolerance</p>'
    rows = "".join(
        f'<tr data-key="{escape(o.host)}"><td>{escape(o.host)}</td><td>{escape(o.measure)}</td>'
        f'<td class="num">{o.value:.4g}</td><td class="num">{o.median:.4g}</td>'
        f'<td class="num">{o.factor:g}×</td></tr>'
        for o in sorted(outliers, key=lambda o: (-o.factor, o.host, o.measure))
    )
    return (
        '<table class="sortable"><thead><tr><th>host</th><th>measure</th><th>value</th>'
        f"<th>cohort median</th><th>worse by</th></tr></thead><tbody>{rows}</tbody></table>"
    )
