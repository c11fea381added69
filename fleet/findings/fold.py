"""Fold findings that share a cause into one, and rank them: most severe first, then the most
disruptive action, then the most hosts. Linear in findings: dictionary passes only.

Two folds, in order:
  1. by cause on one host set: findings about the same topic on the same hosts (a torch build
     without sm_120, and the four rules it fails, and the 11 facts it changes) become one, said
     by the finding that says it best (`weight`), the others counted as related;
  2. by text across hosts: findings that read alike on different hosts become one over all of
     them (a row remap pending on 40 hosts is one line).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fleet.findings.model import ACTIONS, RULE, SEVERITIES, Finding


def fold(findings: Iterable[Finding]) -> list[Finding]:
    return rank(_fold_alike(_fold_causes(findings)))


def _fold_causes(findings: Iterable[Finding]) -> list[Finding]:
    groups: dict[tuple[tuple[str, ...], str], list[Finding]] = {}
    alone: list[Finding] = []
    for finding in findings:
        if finding.topic:
            groups.setdefault((finding.hosts, finding.topic), []).append(finding)
        else:
            alone.append(finding)
    return alone + [_one_cause(group) for group in groups.values()]


def _one_cause(group: list[Finding]) -> Finding:
    if len(group) == 1:
        return group[0]
    ordered = sorted(group, key=lambda f: (SEVERITIES.index(f.severity), f.weight))
    best = ordered[0]
    related = [f.kind for f in ordered[1:]]
    wheres = sorted({f.where for f in group if f.where})
    # a rule's fix says how (install this build); the diff's only that the hosts differ
    fix = next((f.fix for f in ordered if f.weight == RULE and f.fix), best.fix)
    return dataclasses.replace(
        best,
        what=f"{best.what} (and {len(related)} related)",
        fix=fix,
        action=max((f.action for f in group), key=ACTIONS.index),
        where=", ".join(wheres),
        evidence={**best.evidence, "related": related},
    )


def _fold_alike(findings: Iterable[Finding]) -> list[Finding]:
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
    return [_joined(group) for group in merged.values()]


def _joined(group: list[Finding]) -> Finding:
    if len(group) == 1:
        return group[0]
    hosts = sorted({host for finding in group for host in finding.hosts})
    return dataclasses.replace(group[0], hosts=tuple(hosts))


def rank(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=_rank_key)


def _rank_key(finding: Finding) -> tuple[int, int, int, str, str]:
    return (
        SEVERITIES.index(finding.severity),
        -ACTIONS.index(finding.action),
        -len(finding.hosts),
        finding.hosts[0] if finding.hosts else "",
        finding.kind,
    )
