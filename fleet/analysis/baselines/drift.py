"""Drift between two runs, its measurements judged against a baseline's bands. Pure.

Without a baseline a measurement drifted when it moved by more than the fixed tolerance (25%); with
one, when it moved by more than its band's half-width: the noise the known-good runs of that
cohort showed (k × 1.4826 × MAD, at most the farthest run plus the floor, at least the floor). A measurement the baseline has no band for
keeps the tolerance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fleet.analysis.across_runs.drift import Change, Drift
from fleet.analysis.across_runs.measured import Key
from fleet.analysis.baselines.build import Baseline, Placed, match_cohort


def judge_drift(
    every: Drift, by_tolerance: Drift, baseline: Baseline, placed: Mapping[str, Placed]
) -> Drift:
    """`every`: the drift with tolerance 0 (each measurement that moved at all); `by_tolerance`:
    the same runs with the usual tolerance. Its measurement changes are replaced by those that
    moved beyond their band."""
    beyond_tolerance = {
        (c.fact, c.old, c.new, host)
        for c in by_tolerance.changes
        if c.kind == "measure"
        for host in c.hosts
    }
    kept: list[Change] = []
    for change in every.changes:
        if change.kind != "measure":
            continue
        key = Key.parse(change.fact)
        hosts = []
        for host in change.hosts:
            cohort = match_cohort(placed[host], baseline.cohorts) if host in placed else None
            band = cohort.bands.get(key) if cohort is not None and key is not None else None
            if band is None:
                moved = (change.fact, change.old, change.new, host) in beyond_tolerance
            else:
                moved = abs(_number(change.new) - _number(change.old)) > band.half_width
            if moved:
                hosts.append(host)
        if hosts:
            kept.append(dataclasses.replace(change, hosts=tuple(hosts)))
    others = [c for c in by_tolerance.changes if c.kind != "measure"]
    changes = sorted([*others, *kept], key=lambda c: (-len(c.hosts), c.fact, c.kind))
    return dataclasses.replace(by_tolerance, changes=tuple(changes))


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
