"""A run judged against a baseline: each host's measurements against the bands of its cohort. Pure.

Per host and family (allreduce, allreduce-matrix, fabric) one verdict, as a check rule has:

- fail: a measurement is worse than its band (named with the baseline's median, the host's value,
  the band's judged end, and the software versions that changed since the baseline);
- unknown: the baseline has a measurement the run lacks (never a pass), or the host's cohort is
  not in the baseline (said so, with the cohorts it has);
- skipped: the host was not reached, or the probe that measures the family did not succeed;
- n/a: another kind of run (fabric figures in a probe run, or the reverse), or the baseline has
  no figures of that family for the host's cohort;
- pass: every measurement the baseline has for the cohort is there and inside its band.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.analysis.across_runs.bands import Band, limit, worse_than
from fleet.analysis.across_runs.measured import Key, baseline_families, family_source, host_measured
from fleet.analysis.baselines.build import (
    Baseline,
    BaselineCohort,
    Placed,
    match_cohort,
    place_hosts,
)
from fleet.analysis.baselines.identity import VERSION_LABELS, VERSIONS, host_versions
from fleet.analysis.facts import ProbeFacts, higher_is_better
from fleet.models import NOT_REACHED, HostOutcome, Run


def family_text(family: str) -> str:
    """What a baseline family measures, as its unit says (measured.Family.text)."""
    return baseline_families()[family].text


NAMED = 3  # missing measurements named in a reason; the JSON lists all


def number(value: float) -> str:
    """A figure as a verdict reads it: 12.6, 301, 9.20, 0.00053."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Judged:
    """One measurement of one host against its band; `value` None: the run lacks it."""

    key: Key
    band: Band
    value: float | None

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "unknown"
        return "fail" if worse_than(self.band, self.value, self.key.metric) else "pass"

    @property
    def side(self) -> str:
        return "low" if higher_is_better(self.key.metric) else "high"

    def line(self) -> str:
        """`graph 8 B latency 12.6 → 18.4 µs (band ≤ 13.9 µs)`: the baseline's median, then the
        host's value, then the end of the band it crossed."""
        unit = self.key.unit
        mark = "≥" if self.side == "low" else "≤"
        value = "?" if self.value is None else number(self.value)
        bound = number(limit(self.band, self.key.metric))
        return (
            f"{self.key.short} {number(self.band.median)} → {value} {unit} "
            f"(band {mark} {bound} {unit})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.key.name,
            "verdict": self.verdict,
            "value": self.value,
            "median": self.band.median,
            "low": self.band.low,
            "high": self.band.high,
            "samples": self.band.samples,
            "judged": self.side,
            "unit": self.key.unit,
        }


@dataclass(frozen=True)
class FamilyVerdict:
    family: str
    status: str  # fail | unknown | skipped | pass | n/a
    judged: tuple[Judged, ...] = ()
    reason: str = ""

    @property
    def failures(self) -> tuple[Judged, ...]:
        return tuple(j for j in self.judged if j.verdict == "fail")

    @property
    def missing(self) -> tuple[Judged, ...]:
        return tuple(j for j in self.judged if j.verdict == "unknown")


@dataclass(frozen=True)
class HostJudgement:
    host: str
    own_cohort: str | None  # its cohort in this run (None: not reached)
    cohort: BaselineCohort | None  # the baseline's cohort it was judged against
    versions: Mapping[str, str | None]
    families: Mapping[str, FamilyVerdict]
    note: str = ""  # how it was matched, when not by name

    def version_changes(self) -> list[str]:
        """`NCCL 2.28.9 → 2.29.1` for each version the host runs that the baseline was not
        made on (a version either side did not report is no change)."""
        if self.cohort is None:
            return []
        changes = []
        for name in VERSIONS:
            here, before = self.versions.get(name), self.cohort.versions.get(name, ())
            if here is not None and before and here not in before:
                changes.append(f"{VERSION_LABELS[name]} {'/'.join(before)} → {here}")
        return changes

    def versions_line(self) -> str:
        """Every version, the baseline's beside the host's: `torch 2.11.0+cu130 · NCCL 2.28.9 →
        2.29.1 · …` (one value where they agree)."""
        if self.cohort is None:
            return ""
        parts = []
        for name in VERSIONS:
            here, before = self.versions.get(name), self.cohort.versions.get(name, ())
            label = VERSION_LABELS[name]
            if here is None and not before:
                continue
            if here is None:
                parts.append(f"{label} {'/'.join(before)} (not reported here)")
            elif not before or here in before:
                parts.append(f"{label} {here}")
            else:
                parts.append(f"{label} {'/'.join(before)} → {here}")
        return " · ".join(parts)

    def failure_lines(self, family: str) -> list[str]:
        """One line per measurement outside its band, each with the versions that changed:
        `NCCL 2.28.9 → 2.29.1, graph 8 B latency 12.6 → 18.4 µs (band ≤ 13.9 µs)`."""
        prefix = ", ".join(self.version_changes())
        verdict = self.families.get(family)
        failures = verdict.failures if verdict else ()
        worst = sorted(failures, key=_how_far, reverse=True)
        return [f"{prefix}, {j.line()}" if prefix else j.line() for j in worst]

    def to_dict(self) -> dict[str, Any]:
        cohort = self.cohort
        return {
            "cohort": cohort.name if cohort else None,
            "own_cohort": self.own_cohort,
            "note": self.note or None,
            "versions": dict(self.versions),
            "baseline_versions": {k: list(v) for k, v in cohort.versions.items()}
            if cohort
            else None,
            "families": {
                name: {"verdict": v.status, "reason": v.reason or None}
                for name, v in self.families.items()
            },
            "measurements": [j.to_dict() for v in self.families.values() for j in v.judged],
        }


def _how_far(judged: Judged) -> float:
    """How many times worse than the band's judged end (for the worst first)."""
    bound = limit(judged.band, judged.key.metric)
    value = judged.value or 0.0
    if bound <= 0 or value <= 0:
        return float("inf")
    return bound / value if judged.side == "low" else value / bound


@dataclass(frozen=True)
class BaselineJudgement:
    baseline: Baseline
    hosts: tuple[HostJudgement, ...]

    def verdicts(self, family: str) -> list[tuple[HostJudgement, FamilyVerdict]]:
        return [(h, h.families[family]) for h in self.hosts if family in h.families]

    @property
    def failed(self) -> bool:
        return any(v.status == "fail" for h in self.hosts for v in h.families.values())

    def to_dict(self) -> dict[str, Any]:
        baseline = self.baseline
        return {
            "file": baseline.path or None,
            "made_by": baseline.fleet_version,
            "created": baseline.created,
            "runs": len(baseline.runs),
            "k": baseline.k,
            "floor": baseline.floor,
            "families": list(baseline.families),
            "hosts": {h.host: h.to_dict() for h in self.hosts},
        }


# ------------------------------------------------------------------------------------- judging


def judge_run(
    run: Run, baseline: Baseline, declarations: Mapping[str, ProbeFacts]
) -> BaselineJudgement:
    """Every host of `run` against the bands of its cohort in `baseline` (cohorts made as the
    baseline's were: with its cohort_by, else the run's own)."""
    placed = place_hosts(run, declarations, baseline.cohort_by or run.cohort_by)
    families = baseline.families
    judged = tuple(
        _judge_host(run, outcome, placed.get(name), baseline, families)
        for name, outcome in run.hosts.items()
    )
    return BaselineJudgement(baseline, judged)


def _judge_host(
    run: Run,
    outcome: HostOutcome,
    placed: Placed | None,
    baseline: Baseline,
    families: Sequence[str],
) -> HostJudgement:
    versions = host_versions(outcome)
    if placed is None or outcome.status in NOT_REACHED:
        error = (outcome.error or "").splitlines()[0] if outcome.error else ""
        why = f"host {outcome.status}: {error}".rstrip(": ")
        skipped = {f: FamilyVerdict(f, "skipped", reason=why) for f in families}
        return HostJudgement(outcome.name, None, None, versions, skipped)
    cohort = match_cohort(placed, baseline.cohorts)
    note = ""
    if cohort is not None and cohort.name != placed.cohort:
        note = f"{placed.cohort} judged as {cohort.name}: the same GPUs"
    measured = host_measured(run, outcome)
    verdicts = {
        family: _judge_family(run, outcome, family, placed, cohort, baseline, measured)
        for family in families
    }
    return HostJudgement(outcome.name, placed.cohort, cohort, versions, verdicts, note)


def _file(baseline: Baseline) -> str:
    return f" {baseline.path}" if baseline.path else ""


def _judge_family(
    run: Run,
    outcome: HostOutcome,
    family: str,
    placed: Placed,
    cohort: BaselineCohort | None,
    baseline: Baseline,
    measured: Mapping[Key, float],
) -> FamilyVerdict:
    state, why = family_source(run, outcome, family)
    if state == "not this kind of run":
        return FamilyVerdict(family, "n/a", reason=why or "")
    if cohort is None:
        known = ", ".join(sorted(baseline.cohorts)) or "none"
        return FamilyVerdict(
            family,
            "unknown",
            reason=f"cohort {placed.cohort} is not in the baseline{_file(baseline)} "
            f"(it knows: {known})",
        )
    bands = {key: band for key, band in cohort.bands.items() if key.family == family}
    if not bands:
        return FamilyVerdict(
            family, "n/a", reason=f"the baseline has no {family} figures for {cohort.name}"
        )
    if state == "failed":
        return FamilyVerdict(family, "skipped", reason=why or "")
    judged = tuple(Judged(key, band, measured.get(key)) for key, band in bands.items())
    verdict = FamilyVerdict(family, "pass", judged)
    missing = verdict.missing
    lacking = ""
    if missing and why:  # nothing of the family ran: say why, not each figure
        lacking = f"{why}: the baseline has {len(judged)} {family} measurement(s) for this cohort"
    elif missing:
        names = ", ".join(j.key.short for j in missing[:NAMED])
        more = f", … ({len(missing) - NAMED} more)" if len(missing) > NAMED else ""
        lacking = (
            f"the run lacks {len(missing)} of the baseline's {len(judged)} {family} "
            f"measurement(s): {names}{more}"
        )
    if verdict.failures:
        reason = f"{len(verdict.failures)} of {len(judged)} outside the band"
        return FamilyVerdict(family, "fail", judged, f"{reason}; {lacking}" if lacking else reason)
    if missing:
        return FamilyVerdict(family, "unknown", judged, lacking)
    return verdict
