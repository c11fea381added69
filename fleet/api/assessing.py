"""Everything fleet says about one run, made in one place: the cross-host diff, the drift against
an earlier run, the verdicts of rules and of a baseline file, line rates, the findings, and the
exit bits. `fleet probe`, `fleet check`, `fleet show`, `fleet diff` and `fleet report` each make
one Assessment and render it; every surface (terminal, JSON, Markdown, JUnit, HTML) reads the
same one, so they cannot disagree.

Inputs that can be wrong (rules files, a baseline file, the saved run to drift against) are read
by `prepare` (fleet.api.judging), before any host is contacted; `assess` then judges the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.analysis.across_hosts.findings import CHECK, DivergenceFinding
from fleet.analysis.across_runs.tolerance import DEFAULT_TOLERANCE
from fleet.analysis.classes import FactCache
from fleet.analysis.facts import run_declarations
from fleet.api.comparing import cross_host_diff, drift
from fleet.api.judging import Judging as Judging
from fleet.api.judging import Prepared as Prepared
from fleet.api.judging import prepare as prepare
from fleet.api.judging import with_baseline_run as with_baseline_run
from fleet.exits import EXIT_CHECK_FAILED, EXIT_DRIFT
from fleet.findings.assessment import Assessment
from fleet.findings.fold import fold
from fleet.findings.model import SEVERITIES, Finding, NotJudgedLine
from fleet.models import Run

if TYPE_CHECKING:
    from fleet.analysis.across_runs.drift import Drift
    from fleet.analysis.baselines.judge import BaselineJudgement
    from fleet.checks import CheckReport
    from fleet.units.allreduce.linerate import CohortLineRate


def assess(
    run: Run, judging: Judging, prepared: Prepared, where: str, probed_code: int = 0
) -> Assessment:
    """Judge `run` by `judging` with what `prepare` read. `probed_code`: the bits of probing
    it now (none for a saved run). The run's payloads are classed once, for the diff, the
    drift and the rules alike (`classes`)."""
    classes = FactCache(run_declarations([run], judging.probe_dirs))
    classes.read_as_edits(run.payload_edits)
    diff = cross_host_diff(
        run, judging.tolerance, judging.probe_dirs, judging.cohort_by, classes=classes
    )
    findings_diff = diff
    if not judging.divergence:  # the drift's to say; its findings say a rule's cause as probe does
        findings_diff = dataclasses.replace(diff, findings=_check_grade(diff))
        diff = FleetDiff(tuple(run.hosts), (), (), (), (), (), judging.tolerance)
    judged = _judged_baseline(run, judging, prepared)
    checks = _checks(run, judging, prepared, judged, classes)
    moved = _drift(run, judging, prepared, classes)
    sources = prepared.sources + ((f"baseline {judging.baseline_file}",) if judged else ())
    findings, not_judged = _findings(run, findings_diff, checks)
    assessment = Assessment(
        run=run,
        where=where,
        diff=diff,
        findings=findings,
        not_judged=not_judged,
        drift=moved,
        checks=checks,
        baseline=judged,
        baseline_verdicts=_baseline_verdicts(run, judged),
        gated=judging.shows_verdicts,
        line_rates=_line_rates(run, judging),
        sources=sources,
        exit_code=probed_code,
    )
    return assessment.with_exit_bits(_judged_bits(assessment, judging))


def _check_grade(diff: FleetDiff) -> tuple[DivergenceFinding, ...]:
    """The diff's check-grade findings (a torch that cannot run on its GPUs, NCCL settings that
    differ): the sentence a failed rule's finding folds into, whatever else is shown."""
    return tuple(finding for finding in diff.findings if finding.rank == CHECK)


def _judged_baseline(run: Run, judging: Judging, prepared: Prepared) -> BaselineJudgement | None:
    if prepared.baseline is None:
        return None
    from fleet.api.baselines import judge_baseline

    return judge_baseline(run, prepared.baseline, judging.probe_dirs)


def _baseline_verdicts(run: Run, judged: BaselineJudgement | None) -> CheckReport | None:
    if judged is None:
        return None
    from fleet.api.baselines import baseline_report

    return baseline_report(run, judged)


def _checks(
    run: Run,
    judging: Judging,
    prepared: Prepared,
    judged: BaselineJudgement | None,
    classes: FactCache,
) -> CheckReport | None:
    """The rules' verdicts, the baseline file's beside them (its rules baseline-allreduce, …)."""
    if not judging.rules:
        return _baseline_verdicts(run, judged)
    rules = prepared.rules
    if not judging.judges_every_rule:
        ran = set(run.probes)
        rules = [rule for rule in rules if set(rule.needs) <= ran]
        if not rules and judged is None:  # nothing to judge: no rules engine loaded for it
            return None
    from fleet.api.checking import evaluate

    report = evaluate(rules, run, judging.probe_args, judging.strict, classes=classes)
    if judged is None:
        return report
    from fleet.api.baselines import with_baseline  # the baselines' modules: only when one is

    return with_baseline(report, judged)


def _drift(run: Run, judging: Judging, prepared: Prepared, classes: FactCache) -> Drift | None:
    """Against the earlier run; with a baseline file, measurements judged by its bands."""
    if prepared.old is None:
        return None
    if prepared.baseline is not None:
        from fleet.api.baselines import baseline_drift

        moved = baseline_drift(
            prepared.old, run, prepared.baseline, judging.tolerance, judging.probe_dirs
        )
    else:
        moved = drift(
            prepared.old, run, judging.tolerance, judging.probe_dirs, judging.limit, classes
        )
    return dataclasses.replace(moved, baseline_chosen=prepared.old_chosen)


def _line_rates(run: Run, judging: Judging) -> tuple[CohortLineRate, ...]:
    if not judging.measures_line_rates:
        return ()
    from fleet.api.baselines import line_rates

    return tuple(line_rates(run, judging.probe_dirs))


def _findings(
    run: Run, diff: FleetDiff, checks: CheckReport | None
) -> tuple[tuple[Finding, ...], tuple[NotJudgedLine, ...]]:
    """Every source's findings, folded and ranked (fleet/findings/)."""
    from fleet.findings.sources import check_findings, diff_findings, host_findings, unit_findings

    rule_findings, not_judged = check_findings(checks) if checks is not None else ([], [])
    found = [*host_findings(run), *unit_findings(run), *rule_findings, *diff_findings(diff)]
    return tuple(fold(found)), tuple(not_judged)


def _judged_bits(assessment: Assessment, judging: Judging) -> int:
    """16 for drift found, or a measurement outside its baseline band; 32 for a failed check
    when the command gates on rules (fleet check), never for findings alone (fleet probe)."""
    bits = 0
    if assessment.drift is not None and assessment.drift.found:
        bits |= EXIT_DRIFT
    checks = assessment.checks
    if checks is not None and judging.rules_set_exit and checks.fails(judging.strict):
        bits |= EXIT_CHECK_FAILED
    if judging.fail_on is not None and _any_at_least(assessment.findings, judging.fail_on):
        bits |= EXIT_CHECK_FAILED
    outside_band = assessment.baseline_verdicts
    if judging.band_sets_drift and outside_band is not None and outside_band.failed:
        bits |= EXIT_DRIFT  # fleet probe --baseline-file: a measurement outside its band
    return bits


def _any_at_least(findings: Sequence[Finding], severity: str) -> bool:
    worst = SEVERITIES.index(severity)
    return any(SEVERITIES.index(finding.severity) <= worst for finding in findings)


def write_page(
    assessment: Assessment, path: str | Path, source: str | None, tolerance: float | None = None
) -> Path:
    """The HTML report of an assessment (`fleet report`, and --html of probe and check)."""
    from fleet.api.runs import write_report

    return write_report(
        assessment.run,
        path,
        diff=assessment.diff,
        drift=assessment.drift,
        checks=assessment.shown_verdicts,
        exit_code=assessment.exit_code,
        source=source,
        tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
        baseline=assessment.baseline,
        findings=assessment.findings,
    )
