"""The gpubench probe's helper in a host's rule document: `_gpubench`, its figures scored against
the host's best GPU and the run's cohort (every GPU of its model in the run), with the host's
tolerances (`probe_args: gpubench: {tolerance, pair_tolerance}`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fleet.checks import HostHelpers, plain_copy
from fleet.models import HostOutcome
from fleet.units.gpubench import facts as gpubench

HELPERS = {"_gpubench": "gpubench"}
# It scores measured figures (masked) against the run's cohort medians, with the host's
# probe arguments: its value keys a rule's answer (fleet.checks.sharing).
PAYLOAD_HELPERS = {"_gpubench": ("gpubench",)}
ARGUMENT_HELPERS = frozenset({"_gpubench"})
Cohort = tuple[Mapping[str, Mapping[str, float]], Mapping[str, int]]


def run_context(outcomes: Mapping[str, HostOutcome]) -> Cohort:
    """Every GPU of each model in the run: what `_gpubench` holds each host's GPUs against."""
    benches = [o.probes["gpubench"].data for o in outcomes.values() if o.probe_ok("gpubench")]
    return (gpubench.cohort_medians(benches), gpubench.cohort_sizes(benches))


def add_helpers(document: dict[str, Any], host: HostHelpers, wanted: Callable[[str], bool]) -> None:
    bench = host.outcome.probes.get("gpubench")
    if wanted("_gpubench") and bench is not None and bench.status == "ok":
        # the cohort is the run's, the same for every host judged together
        document["_gpubench"] = host.kept(
            ("_gpubench", id(bench.data), id(host.probe_args), id(host.context)),
            lambda: plain_copy(helper_summary(bench.data, host.probe_args, host.context)),
        )


def helper_summary(
    data: Mapping[str, Any], probe_args: Mapping[str, Any] | None, cohort: Cohort | None
) -> dict[str, Any]:
    """`_gpubench`: tolerances from the host's probe_args (gpubench.tolerance, .pair_tolerance)."""
    args = (probe_args or {}).get("gpubench") or {}
    medians, sizes = cohort if cohort is not None else (None, None)
    return gpubench.summary(
        data,
        tolerance=float(args.get("tolerance", gpubench.DEFAULT_GPU_TOLERANCE)),
        pair_tolerance=float(args.get("pair_tolerance", gpubench.DEFAULT_PAIR_TOLERANCE)),
        cohort=medians,
        cohort_size=sizes,
    )
