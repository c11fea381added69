"""Where findings come from: hosts that could not be reached or whose probes failed, failed rules
(fleet/findings/from_checks.py), and the cross-host diff's divergence inside a cohort. Each source
is linear in what it reads; fold.py folds and ranks their union."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fleet.analysis.across_hosts.findings import CHECK, COHORT, SOFTWARE
from fleet.analysis.across_hosts.findings import Finding as DiffFinding
from fleet.analysis.facts import probe_of
from fleet.findings.model import DIVERGENCE, RULE, SENTENCE, Finding, NotJudgedLine
from fleet.models import NOT_REACHED, NOT_USABLE, HostOutcome, Run

if TYPE_CHECKING:
    from fleet.analysis.across_hosts.diff import FleetDiff
    from fleet.checks import CheckReport

REACH_FIX = {
    "hostkey_unknown": "check the fingerprint, then run again with --accept-new",
    "hostkey_changed": "the host key changed: find out why before trusting the new key",
    "auth_failed": "check the user and key (try: ssh USER@HOST true)",
    "no_python": "install Python 3.8 or newer on the host, or set python: in the inventory",
    "unavailable": "the scheduler says the node is down or drained: see sinfo -R",
}


# What a finding is about, from the probes it reads, first match wins: a rule reading torch and
# gpu (torch sees every GPU) is about torch; one reading health is about the GPU's health.
TOPICS = (
    ("health", "health"),
    ("live", "live"),
    ("torch", "torch"),
    ("imports", "torch"),
    ("dir", "torch"),
    ("packages", "torch"),
    ("nccl", "nccl"),
    ("net", "net"),
    ("allreduce", "allreduce"),
    ("gpubench", "gpubench"),
    ("gpu", "gpu"),
)
DIFF_TOPICS = {"arch": "torch", "import": "torch", "nccl": "nccl"}


def topic_of(probes: Iterable[str]) -> str:
    named = set(probes)
    return next((topic for probe, topic in TOPICS if probe in named), "")


def host_findings(run: Run) -> list[Finding]:
    """One finding per host that was not reached or whose probes failed, the host's own error."""
    found: list[Finding] = []
    for outcome in run.hosts.values():
        if outcome.status in NOT_REACHED or outcome.status in NOT_USABLE:
            found.append(_not_reached(outcome))
        else:
            found.extend(_probe_failures(outcome))
    return found


def _not_reached(outcome: HostOutcome) -> Finding:
    status, message = outcome.ending()
    first = message.strip().splitlines()[0] if message.strip() else status
    return Finding(
        severity="error",
        kind=status,
        what=f"not reached ({status}): {first}",
        hosts=(outcome.name,),
        action="check-access",
        fix=REACH_FIX.get(status, outcome.hint or "is the host up and sshd listening?"),
    )


def _probe_failures(outcome: HostOutcome) -> Iterable[Finding]:
    for probe in outcome.failed_probes:
        result = outcome.probes[probe]
        error = (result.error or result.status).splitlines()[0]
        yield Finding(
            severity="warning",
            kind="probe-failed",
            what=f"probe {probe} {result.status}: {error}",
            hosts=(outcome.name,),
            action="none",
            fix=f"run it by hand on the host (python3 probes/{probe}.py); --debug shows the trace",
        )


def check_findings(report: CheckReport) -> tuple[list[Finding], list[NotJudgedLine]]:
    """Failed rules as findings (fleet/findings/from_checks.py), each told what it is about so
    that one cause folds into one finding; the rules not judged, one line per cause."""
    from fleet.findings.from_checks import not_judged_lines, rule_findings

    topics = {result.rule.id: topic_of(result.rule.needs) for result in report.results}
    found = [
        dataclasses.replace(f, topic=topics.get(f.kind, ""), weight=RULE)
        for f in rule_findings(report)
    ]
    return found, not_judged_lines(report)


def diff_findings(diff: FleetDiff) -> list[Finding]:
    """The diff's check-grade findings and divergence inside a cohort (its ranks 1 and 2), and
    software that differs between cohorts (rank 3) as information. What differs between unlike
    machines as expected (rank 4) is not a finding."""
    found: list[Finding] = []
    for item in diff.findings:
        made = _from_diff(item)
        if made is not None:
            found.append(made)
    return found


def _from_diff(item: DiffFinding) -> Finding | None:
    facts = {"facts": list(item.facts[:5]), "count": len(item.facts)}
    if item.rank == CHECK:
        return Finding(
            "error",
            f"divergence-{item.kind}",
            item.title,
            _odd(item),
            "fix-config",
            "make these hosts match the rest of their cohort",
            evidence=facts,
            topic=DIFF_TOPICS.get(item.kind, ""),
            weight=SENTENCE,
        )
    if item.rank == COHORT:
        return Finding(
            "warning",
            "divergence",
            item.title,
            _odd(item),
            "fix-config",
            "fleet diff RUN lists the facts; make the odd hosts match",
            evidence=facts,
            topic=topic_of(probe_of(fact) for fact in item.facts),
            weight=DIVERGENCE,
        )
    if item.rank == SOFTWARE:
        return Finding(
            "info",
            "divergence-between-cohorts",
            item.title,
            item.hosts,
            "none",
            "expected only if the cohorts run different software",
            evidence=facts,
        )
    return None


def _odd(item: DiffFinding) -> tuple[str, ...]:
    return item.odd_hosts or item.hosts
