"""Robust bands: where a measurement of known-good runs lies, and whether a new value is worse. Pure.

A band is the median of the known-good values ± a half-width:

    half = max(floor × |median|, min(k × 1.4826 × MAD, spread + floor × |median|))

MAD is the median absolute deviation from the median; × 1.4826 makes it a standard deviation for
normal noise, so k = 3 is "three sigmas" while one wild run among several moves neither the median
nor the MAD. spread is the farthest known-good value's distance from the median: with few runs
k × 1.4826 × MAD reaches far past every run (two runs 1.7× apart would let a doubled one pass), so
a band reaches no further than the known-good runs themselves plus the floor. The floor keeps a
band from being narrower than the noise fleet cannot see: one run (MAD 0), or runs that happened
to agree. A band is judged on its worse side only: latency above
it fails, bus bandwidth below it fails; a host faster than its band passes (it is not a regression).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# one rule for which way is worse, the diff's too (every unit's BETTER_HIGHER); the baselines'
# metrics are latency_us and busbw_gbps only, judged as they always were
from fleet.analysis.facts import higher_is_better

MAD_TO_SIGMA = 1.4826  # a normal distribution's standard deviation per MAD
DEFAULT_K = 3.0  # half-width in (MAD-estimated) standard deviations
DEFAULT_FLOOR = 0.10  # … and at least this share of the median
SIGNIFICANT = 4  # digits kept in a baseline file


@dataclass(frozen=True)
class Band:
    median: float
    low: float
    high: float
    samples: int

    @property
    def half_width(self) -> float:
        return max(self.high - self.median, self.median - self.low)


def significant(value: float, digits: int = SIGNIFICANT) -> float:
    """`value` rounded to `digits` significant digits (0 stays 0)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def make_band(values: Sequence[float], k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR) -> Band:
    """The band of `values` (at least one): median ± max(floor·|median|, min(k·1.4826·MAD,
    spread + floor·|median|)) (module docstring), the low end never below zero (no measurement
    fleet takes is negative), rounded as a file keeps it."""
    if not values:
        raise ValueError("a band needs at least one value")
    middle = float(statistics.median(values))
    mad = float(statistics.median(abs(v - middle) for v in values))
    spread = max(abs(v - middle) for v in values)
    least = floor * abs(middle)
    half = max(least, min(k * MAD_TO_SIGMA * mad, spread + least))
    return Band(
        significant(middle),
        significant(max(0.0, middle - half)),
        significant(middle + half),
        len(values),
    )


def worse_than(band: Band, value: float, metric: str) -> bool:
    """Whether `value` is outside `band` on its worse side: below it for bandwidths, above it
    for latencies and times."""
    return value < band.low if higher_is_better(metric) else value > band.high


def limit(band: Band, metric: str) -> float:
    """The end of the band that is judged: the low end for bandwidths, the high end otherwise."""
    return band.low if higher_is_better(metric) else band.high
