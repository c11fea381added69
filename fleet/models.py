"""The data that flows through fleet: hosts in, outcomes and runs out. Frozen, JSON-friendly."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, get_args


def now() -> str:
    """This moment in UTC, as runs record their start and end: 2025-01-31T12:00:00.000Z."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# The run document's id (docs/documents.md: what each version changed; fleet/schemas/run.schema.json
# its shape). Older ids load as long as fleet can still read them; any other id is refused.
RUN_SCHEMA = "fleet.run/2"
# How far a measurement may move before it is different (the diff, drift) or bad (a fabric pair
# against the median pair): fleet's one default. Here, below every stage, as fabric/ sits under
# analysis/. gpubench judges a GPU against GPUs of its own model by 10%
# (fleet/units/gpubench/facts.py DEFAULT_GPU_TOLERANCE): a different quantity, kept as it was.
DEFAULT_TOLERANCE = 0.25
READABLE_RUN_SCHEMAS = ("fleet.run/1", RUN_SCHEMA)
FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/=]+")

# Every host ends with exactly one of these (docs/using.md, "Host statuses"). Who says which:
# execution.protocol (ok, partial, timeout, no_python, output_truncated, interrupted, unreachable
# when the connection is lost), the transports through fleet.errors' HostError subclasses
# (unreachable, auth_failed, hostkey_unknown, hostkey_changed, no_python, unavailable), and
# fleet fabric (ok, partial, or the HostError's).
HostStatus = Literal[
    "ok",
    "partial",
    "unreachable",
    "timeout",
    "auth_failed",
    "hostkey_unknown",
    "hostkey_changed",
    "no_python",
    "output_truncated",
    "interrupted",
    "unavailable",
]
HOST_STATUSES: tuple[HostStatus, ...] = get_args(HostStatus)
NOT_REACHED: frozenset[HostStatus] = frozenset(
    {"unreachable", "auth_failed", "hostkey_unknown", "hostkey_changed", "no_python"}
)
PROBE_TROUBLE: frozenset[HostStatus] = frozenset({"partial", "timeout", "output_truncated"})
# Nodes the scheduler itself reports unusable (down, drained, draining, failed): not part of the
# usable fleet, so they are listed and counted apart but set no exit bit (neither set above).
NOT_USABLE: frozenset[HostStatus] = frozenset({"unavailable"})


@dataclass(frozen=True)
class Host:
    """One host of the inventory, every setting resolved (host > group vars > defaults)."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    python: str = "python3"
    jump: str | None = None
    connect_timeout: float = 10.0
    transport: str = "ssh"
    groups: tuple[str, ...] = ()
    probe_args: Mapping[str, Any] = field(default_factory=dict)
    jump_host: Host | None = None  # `jump` resolved: an inventory host, or user@host:port
    identities_only: bool = False  # ssh_config IdentitiesOnly: identity_file only, no agent keys
    # ProxyCommand as the argv fleet runs (no shell) with the connection on its stdin and stdout,
    # %-tokens expanded by fleet.inventory.resolve; None: connect directly (or through jump_host)
    proxy_command: tuple[str, ...] | None = None
    identity_files: tuple[str, ...] = ()  # every identity file configured; identity_file: offered
    # Why fleet will not contact this host: a setting that changes where or how ssh would connect
    # and that fleet cannot honour ("hosts.ini: host gpu-03: ansible_ssh_common_args -o …"), one
    # line per setting.
    refused: str | None = None
    # the Slurm node this host is (`slurm_node:`; None: its name), for fleet check --drain/--resume
    slurm_node: str | None = None
    # setting → where its value came from, for `fleet hosts` and errors: "inventory inv.yaml:14",
    # "ssh_config ~/.ssh/config:3", "ansible hosts.ini", "cli"; a setting not listed is a default
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)

    def origin(self, setting: str) -> str:
        """Where `setting` came from: 'inventory inv.yaml:14', 'ssh_config …', 'default'."""
        return self.origins.get(setting, "default")

    def target(self) -> str:
        """user@address:port as a person would type it (slurm:NODE for a Slurm node)."""
        if self.transport == "slurm":
            return f"slurm:{self.name}"
        user = f"{self.user}@" if self.user else ""
        return f"{user}{self.address}:{self.port}" if self.transport == "ssh" else "local"


# A payload read as an edit of another: itself, the payload it edits, the paths (keys and list
# indices) of the scalars that differ (fleet.jsontext.Edit)
PayloadEdit = tuple[Any, Any, tuple[tuple[Any, ...], ...]]


# Results and hosts in slots, not a __dict__ (where Python has dataclass slots, 3.10): a 20,000-host
# run holds 160,000 results and 20,000 hosts, 43 MB less
SLOTTED: dict[str, Any] = {"slots": True} if sys.version_info >= (3, 10) else {}


@dataclass(frozen=True, **SLOTTED)
class ProbeResult:
    status: str
    ok: bool
    data: Mapping[str, Any]
    error: str | None
    elapsed_s: float
    output_tail: str = ""
    # a probe that raised: the tail of its traceback (its last frames, file:line each); "" else
    traceback: str = ""

    @property
    def not_applicable(self) -> bool:
        """The probe cannot apply to this host by its nature (allreduce on one GPU): it says so
        with `ok: false` and `data.not_applicable: true`; rules that need it are n/a there."""
        return self.status == "absent" and self.data.get("not_applicable") is True

    def to_dict(self) -> dict[str, Any]:
        document = {
            "status": self.status,
            "ok": self.ok,
            "data": self.data,
            "error": self.error,
            "elapsed_s": self.elapsed_s,
            "output_tail": self.output_tail,
        }
        if self.traceback:  # optional: only a probe that raised has one
            document["traceback"] = self.traceback
        return document

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ProbeResult:
        get = raw.get
        return cls.read(
            get("status"),
            get("ok"),
            get("data"),
            get("error"),
            get("elapsed_s"),
            get("output_tail"),
            get("traceback"),
        )

    @classmethod
    def read(
        cls,
        status: Any,
        ok: Any,
        data: Any,
        error: Any,
        elapsed_s: Any,
        output_tail: Any,
        traceback: Any,
    ) -> ProbeResult:
        """One from its document's members as they were read (None: absent), defaults filled
        in as from_dict fills them: the run reader (fleet/rundoc.py) makes a result of the
        members it matched, with no document in between."""
        # made without __init__'s frozen setattr and argument checks: a 20,000-host run reads
        # 160,000
        made: ProbeResult = object.__new__(cls)
        put = object.__setattr__
        put(made, "status", status or ("ok" if ok else "failed"))
        put(made, "ok", bool(ok))
        put(made, "data", data or {})
        put(made, "error", error)
        put(made, "elapsed_s", float(elapsed_s or 0.0))
        put(made, "output_tail", output_tail or "")
        put(made, "traceback", traceback or "")
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (the workers' stream) by its fields: slotted and frozen alike, on every Python."""
        fields = (self.status, self.ok, self.data, self.error, self.elapsed_s)
        return (ProbeResult, (*fields, self.output_tail, self.traceback))


@dataclass(frozen=True, **SLOTTED)
class HostOutcome:
    name: str
    status: HostStatus
    address: str
    error: str | None = None
    hint: str | None = None
    elapsed_s: float = 0.0
    python: str | None = None
    probes: Mapping[str, ProbeResult] = field(default_factory=dict)

    def probe_ok(self, probe: str) -> bool:
        """Whether probe `probe` ran here and succeeded."""
        result = self.probes.get(probe)
        return result is not None and result.status == "ok"

    @property
    def failed_probes(self) -> list[str]:
        return [n for n, r in self.probes.items() if r.status in ("failed", "timeout")]

    def ending(self) -> tuple[str, str]:
        """Status and message (error, then hint) with the host's own name, address and key
        fingerprint blanked out: hosts that ended alike (1,000 refused connections, unknown keys
        on a first run) compare equal, so they are said once."""
        text = f"{self.error or ''}\n{self.hint or ''}"
        for own in sorted({self.name, self.address} - {""}, key=len, reverse=True):
            text = text.replace(own, "…")
        return self.status, FINGERPRINT.sub("SHA256:…", text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "hint": self.hint,
            "address": self.address,
            "elapsed_s": self.elapsed_s,
            "python": self.python,
            "probes": {n: r.to_dict() for n, r in self.probes.items()},
        }

    @classmethod
    def from_dict(cls, name: str, raw: Mapping[str, Any]) -> HostOutcome:
        probes = {
            # a result the run reader made already (fleet/rundoc.py), or its document
            n: r if type(r) is ProbeResult else ProbeResult.from_dict(r)
            for n, r in (raw.get("probes") or {}).items()
        }
        if raw["status"] not in HOST_STATUSES:  # a hand-edited or newer document: say so, early
            raise ValueError(f"host {name}: unknown status {raw['status']!r}")
        get = raw.get
        return cls.read(
            name,
            raw["status"],
            get("error"),
            get("hint"),
            get("address"),
            get("elapsed_s"),
            get("python"),
            probes,
        )

    @classmethod
    def read(
        cls,
        name: str,
        status: Any,
        error: Any,
        hint: Any,
        address: Any,
        elapsed_s: Any,
        python: Any,
        probes: Mapping[str, ProbeResult],
    ) -> HostOutcome:
        """One from its document's members as they were read (None: absent; its status one of
        HOST_STATUSES), as from_dict makes it: the run reader (fleet/rundoc.py) makes a host of
        the members it matched, with no document in between."""
        # made without __init__'s frozen setattr and argument checks, as ProbeResult.read makes
        # a result
        made: HostOutcome = object.__new__(cls)
        put = object.__setattr__
        put(made, "name", name)
        put(made, "status", status)
        put(made, "address", address or "")
        put(made, "error", error)
        put(made, "hint", hint)
        put(made, "elapsed_s", float(elapsed_s or 0.0))
        put(made, "python", python)
        put(made, "probes", probes)
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (the workers' stream) by its fields: slotted and frozen alike, on every Python."""
        fields = (self.name, self.status, self.address, self.error, self.hint, self.elapsed_s)
        return (HostOutcome, (*fields, self.python, self.probes))


@dataclass(frozen=True)
class Run:
    fleet_version: str
    started: str
    finished: str
    bundle_sha256: str
    hosts: Mapping[str, HostOutcome]
    probes: tuple[str, ...] = ()
    inventory: str | None = None
    interrupted: bool = False
    # Optional, added during fleet.run/1 (absent from older documents): how the hosts
    # were reached ("ssh", "local", "slurm"; comma-joined when mixed), and for a Slurm run the
    # target, job and step ids and each node's Slurm state and reason.
    transport: str | None = None
    slurm: Mapping[str, Any] | None = None
    fabric: Mapping[str, Any] | None = None  # `fleet fabric` runs: pairs, ring, suspects
    # the inventory's `cohort_by` (a JMESPath naming each host's cohort), so that a saved run is
    # diffed as it was when probed; absent: the default cohorts
    cohort_by: str | None = None
    # each shipped probe's FACTS declaration ({"volatile": ["read_at"], …}; {} when it has none),
    # so that a saved run is compared as it was probed, wherever its probes' files are now;
    # None: not recorded (documents written before it was added, fabric runs)
    facts: Mapping[str, Mapping[str, Sequence[str]]] | None = None
    # the --limit the hosts were selected with (absent: every host of the inventory), so that
    # drift compares only the hosts both runs selected
    limit: str | None = None
    # not in the document: the payloads the run reader made as an edit of another
    # (fleet.jsontext.EditedDecoder), by id: the fact cache classes each as the one it edits
    payload_edits: Mapping[int, PayloadEdit] = field(
        default_factory=dict, compare=False, repr=False
    )

    def to_dict(self) -> dict[str, Any]:
        document = self._required_dict()
        if self.limit is not None:
            document["limit"] = self.limit
        if self.transport is not None:
            document["transport"] = self.transport
        if self.cohort_by is not None:
            document["cohort_by"] = self.cohort_by
        if self.slurm is not None:
            document["slurm"] = dict(self.slurm)
        if self.fabric is not None:
            document["fabric"] = dict(self.fabric)
        if self.facts is not None:
            document["facts"] = {
                n: {k: list(v) for k, v in d.items()} for n, d in self.facts.items()
            }
        return document

    def _required_dict(self) -> dict[str, Any]:
        return {
            "schema": RUN_SCHEMA,
            "fleet_version": self.fleet_version,
            "started": self.started,
            "finished": self.finished,
            "bundle_sha256": self.bundle_sha256,
            "inventory": self.inventory,
            "probes": list(self.probes),
            "interrupted": self.interrupted,
            "hosts": {n: o.to_dict() for n, o in self.hosts.items()},
        }

    @classmethod
    def from_dict(
        cls, raw: Mapping[str, Any], payload_edits: Mapping[int, PayloadEdit] | None = None
    ) -> Run:
        hosts = {
            # a host the run reader made already (fleet/rundoc.py), or its document
            n: o if type(o) is HostOutcome else HostOutcome.from_dict(n, o)
            for n, o in raw["hosts"].items()
        }
        return cls(
            fleet_version=raw.get("fleet_version", "?"),
            started=raw["started"],
            finished=raw.get("finished", ""),
            bundle_sha256=raw.get("bundle_sha256", ""),
            hosts=hosts,
            probes=tuple(raw.get("probes") or ()),
            inventory=raw.get("inventory"),
            interrupted=bool(raw.get("interrupted")),
            transport=raw.get("transport"),
            slurm=raw.get("slurm"),
            fabric=raw.get("fabric"),
            cohort_by=raw.get("cohort_by"),
            facts=raw.get("facts"),
            limit=raw.get("limit"),
            payload_edits=payload_edits or {},
        )
