"""Findings from a check: every failed rule verdict becomes a finding (what, where, evidence,
the rule's action and its rendered fix); verdicts of one rule that read alike fold into one
finding over their hosts. Rules that could not judge a host are not findings: they become one
"not judged" line per cause. Linear in hosts × rules: verdicts are grouped by what they saw
before any text is built, so 20,000 hosts that saw the same value cost one finding."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from fleet.checks import CheckReport, Rule, RuleResult, RuleVerdict, pairs_summary
from fleet.findings.fold import fold
from fleet.findings.model import Finding, NotJudgedLine
from fleet.findings.xid_catalog import actions_in_text, most_disruptive

# Where on a host, read from the observed text the pack's rules write: a GPU as "GPU1
# (00000000:07:00.0)" (the health probe) or "GPU1 (GPU-uuid, 00000000:07:00.0)" (gpubench); an
# Xid on a bus no GPU of nvidia-smi's list holds ("Xid 63 on 0000:10:1c"); a rank of a live
# job ("comm 5f2e rank 3", "pid 4242 (python …) is stopped"); an RDMA port ("mlx5_0 port 1").
BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
WHERE_PATTERNS = (
    (re.compile(rf"\bGPU(\d+) \((?:GPU-[^,)]*, )?({BUS_ID})"), "GPU{0} ({1})"),
    (
        re.compile(r"\bXid \d+ on ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)"),
        "PCI {0}",
    ),
    (re.compile(r"\bcomm (\S+) rank (\d+)"), "rank {1} (comm {0})"),
    (re.compile(r"\bpid (\d+)\b"), "pid {0}"),
    (re.compile(r"\b([A-Za-z][\w.-]*?)[/: ]port[ :]?(\d+)\b"), "{0} port {1}"),
)
MAX_PLACES = 8  # a finding names at most this many places; the evidence holds them all

# Failures that call for more than the rule's own step, read from the observed text of the pack's
# health rules: a row-remapping failure means the GPU has run out of spare rows (NVIDIA: RMA);
# many uncorrected ECC errors since the driver loaded are more than a reset clears. The number is
# fleet's judgement, not NVIDIA's: one or two (a single bad row) are what a reset and the row
# remapper handle; ten since the driver loaded is a GPU to take out and have looked at.
ECC_UNCORRECTED_INSPECT = 10
REMAP_FAILURE = re.compile(r"\bfailure true\b")
UNCORRECTED = re.compile(r"\b(\d+) uncorrected\b")
MATRIX_EXAMPLES = 2  # example cells a finding names of a matrix (pairs, links)
MAX_WHAT = 400  # characters of observed text in `what`; the evidence keeps the whole value


def rule_findings(report: CheckReport) -> list[Finding]:
    """One finding per failed rule and what it saw, over the hosts that saw it, ranked."""
    return fold(failed_rules(report))


def failed_rules(report: CheckReport) -> list[Finding]:
    """One finding per failed rule and what it saw, in the pack's order, not folded: the
    assessment folds them with every other source's (fleet/findings/sources.py)."""
    return [finding for result in report.results for finding in _result_findings(result)]


def not_judged_lines(report: CheckReport) -> list[NotJudgedLine]:
    """The (rule, host) pairs no rule could judge, one line per cause (unknown or skipped, and
    why), most rules × hosts first: not findings, nothing is known to be wrong there. Probes not
    run on the same hosts are one cause (`probes health, net were not run`): one -p left them
    all out."""
    merged: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    not_run: dict[tuple[str, ...], tuple[list[str], dict[str, None]]] = {}
    for unjudged in report.not_judged():
        probe = NOT_RUN.match(unjudged.reason)
        if probe is not None:
            probes, rules = not_run.setdefault(unjudged.hosts, ([], {}))
            probes.append(probe.group(1))
            rules.update(dict.fromkeys(unjudged.rules))
            continue
        # a host not reached is a finding of its own, with its error: said once, there
        reason = NOT_REACHED.sub(r"\1 (its finding says why)", unjudged.reason)
        cause = f"{unjudged.status}: {reason}" if reason else unjudged.status
        rules, hosts = merged.setdefault(cause, ({}, {}))
        rules.update(dict.fromkeys(unjudged.rules))
        hosts.update(dict.fromkeys(unjudged.hosts))
    lines = [NotJudgedLine(c, tuple(rules), tuple(hosts)) for c, (rules, hosts) in merged.items()]
    for hosts_not_run, (probes, rules) in not_run.items():
        named = f"probe {probes[0]} was" if len(probes) == 1 else f"probes {', '.join(probes)} were"
        lines.append(NotJudgedLine(f"skipped: {named} not run", tuple(rules), hosts_not_run))
    return sorted(lines, key=lambda line: -len(line.rules) * len(line.hosts))


NOT_RUN = re.compile(r"^probe (\S+) was not run$")
NOT_REACHED = re.compile(r"^(host [a-z_]+): .*$", re.DOTALL)


def _result_findings(result: RuleResult) -> Iterator[Finding]:
    failures = result.failures
    if not failures:
        return
    alike: dict[tuple[str, str, str], list[RuleVerdict]] = {}
    for verdict in failures:
        key = (_key(verdict.observed), _key(verdict.expected), verdict.fix or "")
        alike.setdefault(key, []).append(verdict)
    for verdicts in alike.values():
        yield _finding(result.rule, verdicts[0], tuple(v.host for v in verdicts))


def _finding(rule: Rule, verdict: RuleVerdict, hosts: tuple[str, ...]) -> Finding:
    lines = list(_lines(verdict.observed))
    return Finding(
        severity=rule.severity,
        kind=rule.id,
        what=_what(rule, verdict, lines),
        hosts=hosts,
        action=_action(rule, lines),
        fix=verdict.fix or rule.fix,
        where=_where(lines),
        evidence=_evidence(verdict),
    )


def _what(rule: Rule, verdict: RuleVerdict, lines: Sequence[str]) -> str:
    """One line: the rule that failed and what this host had (the rule's description says what
    it wants, which reads as the opposite of what is wrong; the evidence is what is wrong)."""
    if not lines:
        return f"{rule.id}: {rule.description or 'failed'}"
    seen = _matrix_line(lines) or "; ".join(lines)
    if verdict.expected is not None:
        seen = f"{seen}, expected {_text(verdict.expected)}"
    if len(seen) > MAX_WHAT:
        seen = seen[: MAX_WHAT - 1].rstrip() + "…"
    return f"{rule.id}: {seen}"


def _matrix_line(lines: Sequence[str]) -> str | None:
    """A matrix's cells (P2P pairs, links) as one line: the count, each value's count and two
    examples; the evidence keeps every cell (--details, JSON, the page list them)."""
    if len(lines) <= MATRIX_EXAMPLES:
        return None
    return pairs_summary(list(lines), MATRIX_EXAMPLES)


def _action(rule: Rule, lines: Sequence[str]) -> str:
    """The rule's action; an Xid rule's is the most disruptive of the Xids it saw (NVIDIA's
    catalog); a remapping failure or many uncorrected ECC errors go further than the rule's."""
    xids = [action for line in lines for action in actions_in_text(line)]
    action = most_disruptive(xids) if xids else rule.action
    return most_disruptive([action, *_escalations(lines)])


def _escalations(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        if REMAP_FAILURE.search(line):
            yield "contact-vendor"
        counts = [int(n) for n in UNCORRECTED.findall(line)]
        if counts and max(counts) >= ECC_UNCORRECTED_INSPECT:
            yield "inspect-hw"


def _where(lines: Iterable[str]) -> str:
    places: dict[str, None] = {}
    for line in lines:
        for pattern, form in WHERE_PATTERNS:
            for match in pattern.finditer(line):
                places[form.format(*match.groups())] = None
    named = list(places)
    more = len(named) - MAX_PLACES
    return ", ".join(named[:MAX_PLACES]) + (f" and {more} more" if more > 0 else "")


def _evidence(verdict: RuleVerdict) -> dict[str, Any]:
    evidence = {"observed": verdict.observed, "expected": verdict.expected}
    if verdict.cohort is not None:
        evidence["cohort"] = verdict.cohort
    return {name: value for name, value in evidence.items() if value is not None}


def _lines(observed: Any) -> Iterator[str]:
    """The observed value as lines of text: each item of a list, else the value itself."""
    if observed is None:
        return
    for item in observed if isinstance(observed, list) else [observed]:
        if item is not None:
            yield " ".join(_text(item).split())


def _key(value: Any) -> str:
    """Equal values, equal keys: to group the hosts that saw the same."""
    return json.dumps(value, sort_keys=True, default=str)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
