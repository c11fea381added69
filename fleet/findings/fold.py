"""Fold findings that share a cause into one, and rank them: most severe first, then the most
disruptive action, then the most hosts. Linear in findings: dictionary passes only.

Three folds, in order:
  1. by cause on one host set: findings about the same topic on the same hosts (a torch build
     without sm_120, the four rules it fails, the 11 facts it changes) become one, said by the
     finding that says it best (`weight`, then the most disruptive action, then the shortest),
     the others named as related; the fix is the first rule's (rules say how);
  2. divergence that a finding of its topic explains: two H200 hosts split on 11 health facts
     because one GPU has a pending row remap is that finding, not a second one; and a sentence
     over several hosts (NCCL settings split between two hosts) takes in the rules of its topic
     that failed on them;
  3. by text across hosts: findings that read alike on different hosts become one over all of
     them (a row remap pending on 40 hosts is one line).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

from fleet.findings.model import ACTIONS, DIVERGENCE, RULE, SENTENCE, SEVERITIES, Finding
from fleet.hostsets import compact_hosts
from fleet.models import FINGERPRINT


def fold(findings: Iterable[Finding]) -> list[Finding]:
    causes = _fold_causes(findings)
    return rank_findings(_fold_alike(_absorb_into_sentences(_absorb_divergence(causes))))


def _fold_causes(findings: Iterable[Finding]) -> list[Finding]:
    groups: dict[tuple[tuple[str, ...], str], list[Finding]] = {}
    alone: list[Finding] = []
    for finding in findings:
        if finding.topic:
            groups.setdefault((finding.hosts, finding.topic), []).append(finding)
        else:
            alone.append(finding)
    return alone + [_one_cause(group) for group in groups.values()]


def _says_best(finding: Finding) -> tuple[int, int, int, int]:
    return (
        SEVERITIES.index(finding.severity),
        finding.weight,
        -ACTIONS.index(finding.action),
        len(finding.what),
    )


def _one_cause(group: list[Finding]) -> Finding:
    if len(group) == 1:
        return group[0]
    best = min(group, key=_says_best)
    related = list(dict.fromkeys(f.kind for f in group if f is not best))
    wheres = sorted({f.where for f in group if f.where})
    # a rule's fix says how (install this build); the diff's only that the hosts differ. The
    # first rule as the pack orders them: its first rules are its most basic.
    fix = next((f.fix for f in group if f.weight == RULE and f.fix), best.fix)
    return _with_related(
        best,
        related,
        action=max((f.action for f in group), key=ACTIONS.index),
        fix=fix,
        where=", ".join(wheres),
    )


def _with_related(
    finding: Finding,
    related: list[str],
    action: str | None = None,
    fix: str | None = None,
    where: str | None = None,
) -> Finding:
    """`finding` naming `related` kinds too (its evidence's `related`: the surfaces say how many,
    JSON which), and any of action, fix and where replaced."""
    known = list(finding.evidence.get("related") or [])
    every = known + [kind for kind in related if kind not in known]
    return dataclasses.replace(
        finding,
        evidence={**finding.evidence, "related": every} if every else finding.evidence,
        action=finding.action if action is None else action,
        fix=finding.fix if fix is None else fix,
        where=finding.where if where is None else where,
    )


def _absorb_divergence(findings: list[Finding]) -> list[Finding]:
    """Drop divergence that a finding of the same topic, on some of its hosts, accounts for."""
    explained: dict[str, list[int]] = {}
    for index, finding in enumerate(findings):
        if finding.weight != DIVERGENCE and finding.topic:
            explained.setdefault(finding.topic, []).append(index)
    kept = list(findings)
    dropped: set[int] = set()
    for index, finding in enumerate(findings):
        if finding.weight != DIVERGENCE or not finding.topic:
            continue
        cause = next(
            (
                i
                for i in explained.get(finding.topic, ())
                if set(findings[i].hosts) <= set(finding.hosts)
            ),
            None,
        )
        if cause is not None:
            kept[cause] = _with_related(kept[cause], [finding.kind])
            dropped.add(index)
    return [finding for index, finding in enumerate(kept) if index not in dropped]


def _absorb_into_sentences(findings: list[Finding]) -> list[Finding]:
    """A sentence over several hosts (`NCCL settings split 2× H200: … on gpu-08, unset on
    gpu-07`) takes in the rules of its topic that failed on some of those hosts: one cause, said
    once, with the first such rule's fix (it says how) and the most disruptive action."""
    sentences = [i for i, f in enumerate(findings) if f.weight == SENTENCE and f.topic]
    if not sentences:
        return findings
    kept = list(findings)
    dropped: set[int] = set()
    for index, finding in enumerate(findings):
        if finding.weight != RULE or not finding.topic:
            continue
        into = next(
            (
                i
                for i in sentences
                if findings[i].topic == finding.topic
                and len(findings[i].hosts) > len(finding.hosts)
                and set(finding.hosts) <= set(findings[i].hosts)
            ),
            None,
        )
        if into is None:
            continue
        target = kept[into]
        fix = target.fix if target.evidence.get("related") else finding.fix
        action = max((target.action, finding.action), key=ACTIONS.index)
        kept[into] = _with_related(target, [finding.kind], action=action, fix=fix)
        dropped.add(index)
    return [finding for index, finding in enumerate(kept) if index not in dropped]


def _fold_alike(findings: Iterable[Finding]) -> list[Finding]:
    """Findings that read alike fold over their hosts: first those whose text is the same (a
    host not reached with its own address blanked); then those whose text differs only by the
    host each names (`h07: NCCL_ALGO=Tree, …` on four hosts is one finding, `h[05-08]: …`)."""
    once = [_joined(group, _address_blanked) for group in _grouped(findings, _address_blanked)]
    return [_joined(group, _name_blanked) for group in _grouped(once, _name_blanked)]


Blank = Callable[[Finding, str, str], str]


def _grouped(findings: Iterable[Finding], blank: Blank) -> list[list[Finding]]:
    merged: dict[tuple[str, str, str, str, str, str], list[Finding]] = {}
    for finding in findings:
        key = (
            finding.severity,
            finding.kind,
            blank(finding, finding.what, OWN),
            finding.where,
            finding.action,
            blank(finding, finding.fix, OWN),
        )
        merged.setdefault(key, []).append(finding)
    return list(merged.values())


OWN = "HOST"  # what a finding's own host is read as when findings are compared


def _address_blanked(finding: Finding, text: str, name: str) -> str:
    """A host not reached (its evidence names its address): its name and address as `name`, key
    fingerprints as `SHA256:…` (`try: ssh root@10.0.0.7 true` reads alike on every host)."""
    address = str(finding.evidence.get("address") or "")
    if not address:
        return text
    for own in sorted({address, *finding.hosts[:1]} - {""}, key=len, reverse=True):
        text = _without_name(text, own, name)
    return FINGERPRINT.sub("SHA256:…", text)


def _name_blanked(finding: Finding, text: str, name: str) -> str:
    """Any other finding: the name of its hosts, as a whole word, as `name`."""
    if finding.evidence.get("address"):
        return text
    return _without_name(text, compact_hosts(finding.hosts), name) if finding.hosts else text


def _without_name(text: str, own: str, name: str) -> str:
    return re.sub(rf"(?<![\w.-]){re.escape(own)}(?![\w-]|\.\w)", name, text)


def _joined(group: list[Finding], blank: Blank) -> Finding:
    if len(group) == 1:
        return group[0]
    hosts = sorted({host for finding in group for host in finding.hosts})
    evidence = {k: v for k, v in group[0].evidence.items() if k != "address"}
    first = group[0]
    # a command names a host (`ssh root@HOST true`); a sentence names them all (`h[01-04]: …`)
    name = OWN if first.evidence.get("address") else compact_hosts(hosts)
    return dataclasses.replace(
        first,
        hosts=tuple(hosts),
        what=blank(first, first.what, name),
        fix=blank(first, first.fix, name),
        evidence=evidence,
    )


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=_rank_key)


def _rank_key(finding: Finding) -> tuple[int, int, int, str, str]:
    return (
        SEVERITIES.index(finding.severity),
        -ACTIONS.index(finding.action),
        -len(finding.hosts),
        finding.hosts[0] if finding.hosts else "",
        finding.kind,
    )
