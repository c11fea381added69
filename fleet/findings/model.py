"""A finding and its fixed vocabularies: severities and actions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Most severe first. `error`: something will fail (a job, a kernel, a host); `warning`: will be
# slow or fragile; `info`: worth knowing, nothing to do now.
SEVERITIES = ("error", "warning", "info")

# What to do, one word from a fixed set (after GPUd's and NVSentinel's recommended actions, which
# map NVIDIA's Xid catalog to the same few steps), most disruptive last. `check-access`: the host
# was not reached (network, credentials, host key), nothing is known about its GPUs.
ACTIONS = (
    "none",
    "fix-config",
    "check-access",
    "restart-app",
    "reset-gpu",
    "reboot",
    "drain",
    "inspect-hw",
    "contact-vendor",
)


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
        )


@dataclass(frozen=True)
class NotJudgedLine:
    """Rules that could not judge some hosts, folded to one line per cause: not a finding."""

    cause: str
    rules: tuple[str, ...]
    hosts: tuple[str, ...]
