"""A finding and its fixed vocabularies: severities and actions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.checks import ACTIONS

# Most severe first. `error`: something will fail (a job, a kernel, a host); `warning`: will be
# slow or fragile; `info`: worth knowing, nothing to do now.
SEVERITIES = ("error", "warning", "info")
__all__ = ["ACTIONS", "SEVERITIES", "Finding", "NotJudgedLine"]

# ACTIONS (what to do, one word from a fixed set) is defined with the rules, whose `action:`
# names one (fleet/checks/actions.py, a leaf: no rules engine loads for it): the checks come
# before findings in the flow.

# Finding.weight: which of several findings of one cause says it best (fold.py), lower first.
SENTENCE = 0  # a sentence made for the case (the diff's check-grade: "torch X cannot run on …")
RULE = 2  # a failed rule: its description, and the fix that says how
DIVERGENCE = 3  # facts that differ, counted


@dataclass(frozen=True)
class Finding:
    """One thing wrong. `what` is one line a human reads; `hosts` where (folded when shown);
    `where` narrows it on the host (GPU index and bus id, rank, link, port); `evidence` the
    observed values as name → value; `action` one word of ACTIONS and `fix` the words that say
    how. `kind` names its source for machines and for folding: a rule id (`health-ecc-…`), or
    one of `unreachable`, `probe-failed`, `divergence`, `baseline`, `fabric`, `job`."""

    severity: str
    kind: str
    what: str
    hosts: tuple[str, ...]
    action: str = "none"
    fix: str = ""
    where: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    # What it is about, for folding (fold.py): findings on the same hosts about the same thing
    # (`torch`: a torch build that lacks the arch, and the four rules it fails) are one cause.
    topic: str = ""
    # Which of several findings that share a cause says it best (lower first): the diff's
    # check-grade sentence before a rule's statement of what it checks.
    weight: int = RULE

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding severity {self.severity!r}: one of {', '.join(SEVERITIES)}")
        if self.action not in ACTIONS:
            raise ValueError(f"finding action {self.action!r}: one of {', '.join(ACTIONS)}")

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form in the run, check and drift documents (`findings`, schema
        fleet/schemas/findings.schema.json)."""
        document: dict[str, Any] = {
            "severity": self.severity,
            "kind": self.kind,
            "what": self.what,
            "hosts": list(self.hosts),
            "action": self.action,
            "fix": self.fix,
        }
        if self.where:
            document["where"] = self.where
        if self.evidence:
            document["evidence"] = dict(self.evidence)
        if self.topic:
            document["topic"] = self.topic
        return document

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Finding:
        return cls(
            severity=document["severity"],
            kind=document["kind"],
            what=document["what"],
            hosts=tuple(document["hosts"]),
            action=document.get("action", "none"),
            fix=document.get("fix", ""),
            where=document.get("where", ""),
            evidence=dict(document.get("evidence") or {}),
            topic=document.get("topic", ""),
        )


@dataclass(frozen=True)
class NotJudgedLine:
    """Rules that could not judge some hosts, folded to one line per cause: not a finding."""

    cause: str
    rules: tuple[str, ...]
    hosts: tuple[str, ...]
