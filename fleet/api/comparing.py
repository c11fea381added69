"""Comparing: hosts of one run against each other (the cross-host diff), and two runs (drift).

The drift's modules load on first use (`drift`, or the name `Drift`): a run judged with no
earlier run to compare with (`fleet probe` of hosts never probed before) does not load them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.analysis.across_hosts.diff import DEFAULT_TOLERANCE, FleetDiff, compare_hosts
from fleet.analysis.classes import FactCache
from fleet.analysis.facts import run_declarations
from fleet.models import Run

if TYPE_CHECKING:
    from fleet.analysis.across_runs.drift import Drift

__all__ = ["DEFAULT_TOLERANCE", "Drift", "FleetDiff", "cross_host_diff", "drift"]


def cross_host_diff(
    run: Run,
    tolerance: float = DEFAULT_TOLERANCE,
    probe_dirs: Sequence[str | Path] = (),
    cohort_by: str | None = None,
    classes: FactCache | None = None,
) -> FleetDiff:
    """Where the hosts of one run differ: values, name lists, measurements, read per cohort and
    ranked into findings. `cohort_by`: a JMESPath over each host's document naming its cohort
    (default: the run's own, from its inventory, else GPU model × GPU count × interconnect); a
    bad one is a UsageError. Each probe's FACTS declaration is the run's own (as it was
    shipped); `probe_dirs` (besides $FLEET_PROBE_DIR) are read only for probes of a run that
    did not record them. `classes`: a cache to flatten the payloads in, made by the caller over
    run_declarations([run], probe_dirs) and kept to judge the rules with (assess)."""
    if classes is not None:
        declarations = classes.declarations
    else:
        declarations = run_declarations([run], probe_dirs)
    cohort = cohort_by or run.cohort_by
    return compare_hosts(run.hosts.values(), declarations, tolerance, cohort, classes)


def drift(
    old: Run,
    new: Run,
    tolerance: float = DEFAULT_TOLERANCE,
    probe_dirs: Sequence[str | Path] = (),
    limit: str | None = None,
    classes: FactCache | None = None,
) -> Drift:
    """What changed per host between two runs, on the hosts both selected: a host one run did not
    select (a run records its --limit) is left out (Drift.left_out), not new or gone. `limit`
    (--limit syntax: host names, nodesets, globs, !PATTERN) narrows both runs further. Each
    probe's facts are read as the newer run declared them (else the older, else `probe_dirs`).
    `classes`: the new run's payloads already flattened (cross_host_diff's), used where the
    declarations are the same."""
    from fleet.analysis.across_runs.drift import compare_runs

    declarations = run_declarations([new, old], probe_dirs)
    return compare_runs(old, new, declarations, tolerance, limit, classes)


def __getattr__(name: str) -> Any:
    if name == "Drift":
        from fleet.analysis.across_runs.drift import Drift

        return Drift
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
