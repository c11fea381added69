"""Line charts with log axes as inline SVG, written by hand: no plotting library, nothing loaded.

One chart is a `<svg>` element with a `viewBox` (it scales with the page), its axes, ticks with units,
and one `<path>` per series. Colours and line styles come from CSS classes (fleet/render/html/page.py
defines them for light and dark mode), so a chart has no colour of its own and prints in black on
white. Every text that came from a run is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 460, 300
LEFT, RIGHT, TOP, BOTTOM = 58, 12, 26, 44  # room for tick labels, the title and the axis titles
Point = tuple[float, float]


@dataclass(frozen=True)
class Series:
    """One line: `css` says how it is drawn (`host`, `median`, `odd odd-2`); `label` is its tooltip."""

    label: str
    points: tuple[Point, ...]
    css: str


@dataclass(frozen=True)
class BandArea:
    """A shaded range (lowest to highest value at each x) standing in for many lines."""

    label: str
    lower: tuple[Point, ...]
    upper: tuple[Point, ...]


@dataclass(frozen=True)
class LogScale:
    """log10 mapping of [low, high] onto [start, end] pixels."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = math.log10(self.high) - math.log10(self.low)
        share = (math.log10(value) - math.log10(self.low)) / span if span else 0.5
        return self.start + share * (self.end - self.start)


def log_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    band: BandArea | None = None,
    x_ticks: Callable[[float, float], list[tuple[float, str]]] | None = None,
    backdrop: BandArea | None = None,
) -> str:
    """An SVG line chart, both axes logarithmic. Points with a value ≤ 0 cannot be drawn on a log
    axis and are left out (the line breaks there). `backdrop`: a band drawn behind everything
    (a baseline's), outlined."""
    points = [p for s in series for p in s.points if p[0] > 0 and p[1] > 0]
    for shaded in (band, backdrop):
        if shaded:
            points += [p for p in (*shaded.lower, *shaded.upper) if p[0] > 0 and p[1] > 0]
    if not points:
        return f'<p class="empty">{escape(title)}: no data to draw</p>'
    x = _scale([p[0] for p in points], LEFT, WIDTH - RIGHT)
    y = _scale([p[1] for p in points], HEIGHT - BOTTOM, TOP)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text class="chart-title" x="{LEFT}" y="16">{escape(title)}</text>',
        *_axes(x, y, x_label, y_label, x_ticks or decade_ticks),
    ]
    if backdrop:
        parts.append(_band_path(backdrop, x, y, "band baseline"))
    if band:
        parts.append(_band_path(band, x, y))
    parts += [_series_path(s, x, y) for s in series]
    parts.append("</svg>")
    return "".join(parts)


def _scale(values: list[float], start: float, end: float) -> LogScale:
    low, high = min(values), max(values)
    if low == high:  # one value: give it a decade of room
        low, high = low / math.sqrt(10), high * math.sqrt(10)
    return LogScale(low, high, start, end)


def _axes(
    x: LogScale,
    y: LogScale,
    x_label: str,
    y_label: str,
    x_ticks: Callable[[float, float], list[tuple[float, str]]],
) -> list[str]:
    bottom, left = HEIGHT - BOTTOM, LEFT
    parts = [f'<path class="axis" d="M{left} {TOP}V{bottom}H{WIDTH - RIGHT}"/>']
    for value, label in x_ticks(x.low, x.high):
        px = x(value)
        parts.append(f'<path class="grid" d="M{px:.1f} {TOP}V{bottom}"/>')
        parts.append(f'<text class="tick" x="{px:.1f}" y="{bottom + 14}">{escape(label)}</text>')
    for value, label in decade_ticks(y.low, y.high):
        py = y(value)
        parts.append(f'<path class="grid" d="M{left} {py:.1f}H{WIDTH - RIGHT}"/>')
        parts.append(f'<text class="tick y" x="{left - 4}" y="{py + 3:.1f}">{escape(label)}</text>')
    middle_x, middle_y = (left + WIDTH - RIGHT) / 2, (TOP + bottom) / 2
    parts.append(
        f'<text class="axis-title" x="{middle_x:.0f}" y="{HEIGHT - 6}">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text class="axis-title" transform="translate(13 {middle_y:.0f}) rotate(-90)">'
        f"{escape(y_label)}</text>"
    )
    return parts


def _series_path(series: Series, x: LogScale, y: LogScale) -> str:
    return (
        f'<path class="line {escape(series.css)}" d="{_path_data(series.points, x, y)}">'
        f"<title>{escape(series.label)}</title></path>"
    )


def _path_data(points: Sequence[Point], x: LogScale, y: LogScale) -> str:
    """M/L commands; a point that cannot be drawn (≤ 0) starts a new stretch after it."""
    commands, pen_down = [], False
    for px, py in points:
        if px <= 0 or py <= 0:
            pen_down = False
            continue
        commands.append(f"{'L' if pen_down else 'M'}{x(px):.1f} {y(py):.1f}")
        pen_down = True
    return "".join(commands)


def _band_path(band: BandArea, x: LogScale, y: LogScale, css: str = "band") -> str:
    upper = [p for p in band.upper if p[0] > 0 and p[1] > 0]
    lower = [p for p in reversed(band.lower) if p[0] > 0 and p[1] > 0]
    data = _path_data([*upper, *lower], x, y).replace("M", "L")
    return f'<path class="{css}" d="M{data[1:]}Z"><title>{escape(band.label)}</title></path>'


# ------------------------------------------------------------------------------------ ticks


def decade_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """Powers of ten inside [low, high]; 1-2-5 steps when the range spans less than two decades."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = [
        (m * 10.0**e, axis_number(m * 10.0**e))
        for e in range(first, last + 1)
        for m in steps
        if low * 0.999 <= m * 10.0**e <= high * 1.001
    ]
    if len(ticks) > 8:  # many decades: every other one, so labels never touch
        ticks = ticks[:: math.ceil(len(ticks) / 8)]
    return ticks


def byte_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """Powers of two inside [low, high] labelled 8 B, 2 KiB, 1 MiB…; at most 8 of them."""
    first, last = math.ceil(math.log2(low)), math.floor(math.log2(high))
    step = max(1, math.ceil((last - first + 1) / 8))
    return [(2.0**e, size_label(2**e)) for e in range(first, last + 1, step)]


def size_label(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def axis_number(value: float) -> str:
    """Tick text: 0.001, 0.5, 20, 1k, 20k, 1M."""
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"
