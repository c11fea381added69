"""Fold findings that share a cause into one, and rank them: most severe first, then the most
disruptive action, then the most hosts. Linear in findings: one dictionary pass."""

from __future__ import annotations

from collections.abc import Iterable

from fleet.findings.model import ACTIONS, SEVERITIES, Finding


def fold(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (severity, kind, what, where, action, fix): their hosts joined, the
    evidence of the first kept (hosts that share a line of text share its values)."""
    merged: dict[tuple[str, str, str, str, str, str], list[Finding]] = {}
    for finding in findings:
        key = (
            finding.severity,
            finding.kind,
            finding.what,
            finding.where,
            finding.action,
            finding.fix,
        )
        merged.setdefault(key, []).append(finding)
    return rank(_joined(group) for group in merged.values())


def _joined(group: list[Finding]) -> Finding:
    first = group[0]
    if len(group) == 1:
        return first
    hosts = sorted({host for finding in group for host in finding.hosts})
    return Finding(
        first.severity,
        first.kind,
        first.what,
        tuple(hosts),
        first.action,
        first.fix,
        first.where,
        first.evidence,
    )


def rank(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=_rank_key)


def _rank_key(finding: Finding) -> tuple[int, int, int, str, str]:
    return (
        SEVERITIES.index(finding.severity),
        -ACTIONS.index(finding.action),
        -len(finding.hosts),
        finding.kind,
        finding.hosts[0] if finding.hosts else "",
    )
