"""Where findings come from: hosts that could not be reached or whose probes failed, failed rules
(fleet/findings/from_checks.py), the cross-host diff's divergence inside a cohort, and the probes'
units (a unit's findings.py: the NCCL jobs joined across hosts, `fleet jobs`). Each source is
linear in what it reads; fold.py folds and ranks their union."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fleet.analysis.across_hosts.findings import CHECK, COHORT, SOFTWARE, DivergenceFinding
from fleet.analysis.facts import probe_of
from fleet.findings.model import DIVERGENCE, RULE, SENTENCE, Finding, NotJudgedLine
from fleet.hostsets import compact_hosts
from fleet.models import NOT_REACHED, NOT_USABLE, HostOutcome, Run
from fleet.registry import declared, declaring

if TYPE_CHECKING:
    from fleet.analysis.across_hosts.diff import FleetDiff
    from fleet.checks import CheckReport

REACH_FIX = {
    "hostkey_unknown": "check the fingerprint, then run again with --accept-new",
    "hostkey_changed": "the host key changed: find out why before trusting the new key",
    "no_python": "install Python 3.8 or newer on the host, or set python: in the inventory",
    "unavailable": "the scheduler says the node is down or drained: see sinfo -R",
}
# Where the host's own hint is better (it names the real command: `try: ssh -p 2222
# root@10.0.0.7 true`), these are said only without one.
REACH_FALLBACK = {"auth_failed": "check the user and the key against the host's authorized_keys"}


def host_findings(run: Run) -> list[Finding]:
    """Every host that did not finish: not reached (one finding per host, its own error; fold.py
    folds those that read alike), and stopped short (timed out, interrupted, output cut, the
    runner gone), folded here per way of ending with the command that runs them again; then the
    probes that failed on hosts that finished."""
    found: list[Finding] = []
    short: dict[tuple[str, str], list[HostOutcome]] = {}
    for outcome in run.hosts.values():
        if outcome.status in NOT_REACHED or outcome.status in NOT_USABLE:
            found.append(_not_reached(outcome))
            continue
        if _stopped_short(outcome):
            short.setdefault((outcome.status, outcome.hint or ""), []).append(outcome)
        found.extend(_probe_failures(outcome))
    found += [_not_finished(run, alike) for alike in short.values()]
    return found


# How a host that stopped short ended, in words; the severity of each (an interrupted run is
# nothing wrong with its hosts; the rest are trouble the exit code says, bit 8)
NOT_FINISHED = {
    "timeout": ("timed out", "error"),
    "output_truncated": ("output cut short", "error"),
    "partial": ("stopped early", "error"),
    "interrupted": ("not finished", "warning"),
}
RETRY_FIX = {
    "timeout": "raise --timeout, or leave the slow probe out with --probes",
    "interrupted": "the run was interrupted, nothing is known to be wrong there; run them again",
    "partial": "run it by hand on the host (python3 probes/runner/_by_hand.py PROBE); --debug shows the trace",
}


def _stopped_short(outcome: HostOutcome) -> bool:
    """A reached host that did not finish every probe: a probe that failed by itself is its own
    finding (`probe-failed`), a host whose runner ended early (or that ran out of time) is
    this one."""
    if outcome.status == "partial":
        failed = set(outcome.failed_probes)
        named = (outcome.error or "").removeprefix("probe(s) failed: ")
        return not failed or not set(named.split(", ")) <= failed
    return outcome.status in NOT_FINISHED


def _not_finished(run: Run, alike: list[HostOutcome]) -> Finding:
    """Hosts that stopped short alike (status, hint), as one finding: what happened (the
    error, `e.g.` where the hosts' errors differ, each in the evidence), the action `retry` (or
    the host's own hint where it says what to change) and the command for those hosts alone."""
    first = alike[0]
    label, severity = NOT_FINISHED.get(first.status, NOT_FINISHED["partial"])
    errors: dict[str, list[str]] = {}
    for outcome in alike:
        errors.setdefault((outcome.error or first.status).splitlines()[0], []).append(outcome.name)
    error = next(iter(errors))
    said = error if len(errors) == 1 else f"e.g. {error}"
    hosts = tuple(outcome.name for outcome in alike)
    action = "fix-config" if first.status == "output_truncated" else "retry"
    fix = first.hint or RETRY_FIX.get(first.status, RETRY_FIX["partial"])
    return Finding(
        severity=severity,
        kind=first.status,
        what=f"{label}: {said}",
        hosts=hosts,
        action=action,
        fix=f"{fix.rstrip('.')}: `{_again(run, hosts)}`",
        evidence={"errors": errors},
    )


def _again(run: Run, hosts: tuple[str, ...]) -> str:
    inventory = f" -i {run.inventory}" if run.inventory and run.slurm is None else ""
    return f"fleet probe{inventory} --limit {compact_hosts(hosts)}"


def _not_reached(outcome: HostOutcome) -> Finding:
    """The host's own error and its hint as the fix, whole (a host key's fingerprint is what the
    user checks); where hosts ended alike they fold into one finding, their own names, address
    and fingerprints blanked then (fold.py)."""
    status = outcome.status
    message = (outcome.error or "").strip()
    first = message.splitlines()[0] if message else status
    return Finding(
        severity="error",
        kind=status,
        what=f"not reached ({status}): {first}",
        hosts=(outcome.name,),
        action="check-access",
        fix=REACH_FIX.get(status) or outcome.hint or REACH_FALLBACK.get(status, "is the host up?"),
        evidence={"address": outcome.address} if outcome.address else {},
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
            fix=f"run it by hand on the host (python3 probes/runner/_by_hand.py {probe}); --debug shows the trace",
        )


def check_findings(report: CheckReport) -> tuple[list[Finding], list[NotJudgedLine]]:
    """Failed rules as findings (fleet/findings/from_checks.py), each told what it is about so
    that one cause folds into one finding; the rules not judged, one line per cause."""
    from fleet.findings.from_checks import failed_rules, not_judged_lines

    topics = {result.rule.id: declared.topic_of(result.rule.needs) for result in report.results}
    found = [
        dataclasses.replace(f, what=_without_where(f), topic=topics.get(f.kind, ""), weight=RULE)
        for f in failed_rules(report)
    ]
    return found, not_judged_lines(report)


def _without_where(finding: Finding) -> str:
    """A rule's observed text names the GPU the finding's `where` already names: once is enough."""
    if finding.where and f"{finding.where}: " in finding.what:
        return finding.what.replace(f"{finding.where}: ", "", 1)
    return finding.what


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


def _from_diff(item: DivergenceFinding) -> Finding | None:
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
            topic=declared.divergence_topic(item.kind),
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
            topic=declared.topic_of(probe_of(fact) for fact in item.facts),
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


def _odd(item: DivergenceFinding) -> tuple[str, ...]:
    return item.odd_hosts or item.hosts


def unit_findings(run: Run) -> list[Finding]:
    """What the probes' units find wrong that no rule says (fleet/units/PROBE/findings.py,
    `findings(run)`: the live unit's NCCL jobs), of the probes the run holds."""
    return [
        found for _, find in declaring("findings", "findings", run.probes) for found in find(run)
    ]
