"""What a group's ranks reported, turned into one result: a row of the run document's `fabric`
section (which run.py builds). Pure.

busbw is nccl-tests' definition: algbw × 2(n−1)/n, n ranks, algbw = bytes / time of the slowest
rank; GB/s are 10⁹ bytes per second, as nccl-tests prints them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.fabric.plan import Placement

GROUP_STATUSES = ("ok", "failed", "timeout", "skipped", "interrupted")
MAX_REASON_CHARS = 600


@dataclass(frozen=True)
class SizeResult:
    bytes: int
    seconds: float  # per call, slowest rank
    algbw_gbps: float
    busbw_gbps: float
    correct: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "time_us": round(self.seconds * 1e6, 2),
            "algbw_gbps": round(self.algbw_gbps, 4),
            "busbw_gbps": round(self.busbw_gbps, 4),
            "correct": self.correct,
        }


@dataclass(frozen=True)
class GroupResult:
    hosts: tuple[str, ...]
    status: str  # one of GROUP_STATUSES
    ranks: int = 0
    master: str | None = None
    port: int | None = None
    sizes: tuple[SizeResult, ...] = ()
    error: str | None = None  # why it failed, or why it was skipped
    env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per host
    round: int = 0
    busy_ports: tuple[int, ...] = ()  # rendezvous ports its master found taken, before `port`

    @property
    def busbw_gbps(self) -> float | None:
        return self.sizes[-1].busbw_gbps if self.sizes else None

    @property
    def latency_us(self) -> float | None:
        return round(self.sizes[0].seconds * 1e6, 2) if self.sizes else None

    @property
    def correct(self) -> bool | None:
        return all(s.correct for s in self.sizes) if self.sizes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": list(self.hosts),
            "status": self.status,
            "busbw_gbps": None if self.busbw_gbps is None else round(self.busbw_gbps, 4),
            "latency_us": self.latency_us,
            "correct": self.correct,
            "error": self.error,
            "ranks": self.ranks,
            "master": self.master,
            "port": self.port,
            "round": self.round,
            "sizes": [s.to_dict() for s in self.sizes],
            **({"busy_ports": list(self.busy_ports)} if self.busy_ports else {}),
        }


def skipped(hosts: Sequence[str], reason: str, round_index: int = 0) -> GroupResult:
    return GroupResult(tuple(hosts), "skipped", error=reason[:MAX_REASON_CHARS], round=round_index)


# ------------------------------------------------------------------------- from rank lines


@dataclass
class HostReport:
    """Everything one host's rank program said, and how its channel ended."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)  # non-protocol lines (NCCL_DEBUG, warnings)
    failure: str | None = None  # the transport's error, or how the process ended badly
    _buffer: bytes = b""

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            self._take(raw.decode("utf-8", "replace").strip())

    def _take(self, line: str) -> None:
        if not line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            self.noise = [*self.noise[-19:], line[:300]]
            return
        if isinstance(message, dict) and message.get("type") != "tick":
            self.messages.append(message)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == kind]

    def complaint(self) -> str | None:
        """The first thing that went wrong on this host, in words; None if nothing did."""
        for message in self.messages:
            if message.get("type") == "rank_error":
                stage, text = message.get("stage"), str(message.get("error") or "")
                return f"rank {message.get('rank')} failed to {stage}: {last_line(text)}"
            if message.get("type") == "rank_exit":
                return f"rank {message.get('rank')} exited with code {message.get('code')}"
            if message.get("type") == "timeout":
                return f"ranks still running at the deadline ({message.get('after_s')} s)"
        return self.failure


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:MAX_REASON_CHARS] if lines else "no error text"


def conclude_group(
    placements: Sequence[Placement],
    reports: Mapping[str, HostReport],
    *,
    port: int,
    round_index: int,
    timed_out: bool = False,
) -> GroupResult:
    """One group's result from its hosts' reports: ok only if every rank measured every size."""
    hosts = tuple(dict.fromkeys(p.host for p in placements))
    base = GroupResult(hosts, "ok", len(placements), hosts[0], port, round=round_index)
    env = {h: dict(_first_env(reports[h])) for h in hosts if h in reports}
    blame_text = group_error(hosts, reports, master=hosts[0])
    sizes = combine_sizes(reports.values(), len(placements))
    done = sum(len(r.of_type("rank_done")) for r in reports.values())
    if blame_text is None and done == len(placements) and sizes:
        return _replace(base, sizes=sizes, env=env)
    status = "timeout" if timed_out and blame_text is None else "failed"
    reason = blame_text or (
        "no rank finished before the round's deadline"
        if timed_out
        else f"{done} of {len(placements)} ranks finished"
    )
    return _replace(base, status=status, error=reason[:MAX_REASON_CHARS], env=env)


def _replace(result: GroupResult, **changes: Any) -> GroupResult:
    from dataclasses import replace

    return replace(result, **changes)


def _first_env(report: HostReport) -> Mapping[str, str]:
    for message in report.of_type("rank_done"):
        env = message.get("env")
        if isinstance(env, dict):
            return {str(k): str(v) for k, v in env.items()}
    return {}


def group_error(hosts: Sequence[str], reports: Mapping[str, HostReport], master: str) -> str | None:
    """Who broke the round. A host whose process or connection died comes first (its partners'
    errors are only the echo of it), the master before the others (its loss fails everyone)."""
    ordered = sorted(hosts, key=lambda h: h != master)
    for host in ordered:
        report = reports.get(host)
        if report is None or report.failure:
            return _named(host, master, report.failure if report else "never started")
    for host in ordered:
        complaint = reports[host].complaint()
        if complaint:
            return _named(host, master, complaint)
    return None


def _named(host: str, master: str, complaint: str | None) -> str:
    role = "master " if host == master else ""
    return f"{role}{host}: {complaint}"


def combine_sizes(reports: Iterable[HostReport], ranks: int) -> tuple[SizeResult, ...]:
    """Per size, the slowest rank's time (as nccl-tests); sizes not reported by every rank are left out."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for report in reports:
        for message in report.of_type("size"):
            by_size.setdefault(int(message["bytes"]), []).append(message)
    rows = []
    for size, messages in sorted(by_size.items()):
        if len(messages) < ranks:
            continue
        seconds = max(float(m["seconds"]) for m in messages)
        algbw = size / seconds / 1e9 if seconds > 0 else 0.0
        busbw = algbw * 2 * (ranks - 1) / ranks
        correct = all(bool(m.get("correct")) for m in messages)
        rows.append(SizeResult(size, seconds, algbw, busbw, correct))
    return tuple(rows)
