"""Reads the runner's line protocol and concludes one HostOutcome per host. Pure: no I/O.

The remote runner (probes/runner/_host_runner.py) writes one JSON object per line: hello, tick, probe, done,
deadline. The decoder is fed raw bytes as they arrive, keeps every finished probe (so a host that
dies mid-run still reports what it finished), and bounds memory: past `limit_bytes` it refuses more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fleet.models import HostOutcome, HostStatus, ProbeResult
from fleet.redact import mask_secrets, might_hold_secret
from fleet.transport.base import DEFAULT_OUTPUT_LIMIT, ExecResult
from fleet.transport.launch import LAUNCH_GRACE_S

__all__ = ["ExecResult", "StreamDecoder", "Verdict", "build_outcome", "conclude"]

NOISE_TAIL_CHARS = 2000
TRACEBACK_CHARS = (
    4096  # the runner's own bound (probes/runner/_runner_child.py), kept on arrival too
)
MIN_PYTHON = (3, 8)  # the probes' floor (probes/README.md); the runner itself starts on older


@dataclass
class StreamDecoder:
    limit_bytes: int = DEFAULT_OUTPUT_LIMIT
    received: int = 0
    truncated: bool = False
    hello: dict[str, Any] | None = None
    done: bool = False
    deadline_pending: list[str] | None = None
    probes: dict[str, ProbeResult] = field(default_factory=dict)
    noise: str = ""
    expected: frozenset[str] | None = None  # the probes we sent: a host cannot add others
    _partial: bytes = b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Take a chunk of stdout; return the messages it completed. Sets `truncated` past the cap."""
        self.received += len(chunk)
        if self.received > self.limit_bytes:
            self.truncated = True
            return []
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        messages = [m for m in (self._decode(line) for line in lines) if m is not None]
        for message in messages:
            self._record(message)
        return messages

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        text = line.decode("utf-8", "replace").strip()
        if not text:
            return None
        try:
            message = json.loads(text, parse_constant=_not_json)  # NaN, Infinity: no JSON
        except ValueError:
            message = None
        if not isinstance(message, dict) or "type" not in message:
            # e.g. a sitecustomize that prints: keep a tail to explain odd hosts, never fail on it
            self.noise = (self.noise + text + "\n")[-NOISE_TAIL_CHARS:]
            return None
        return message

    def _record(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "hello":
            self.hello = message
        elif kind == "probe" and self._expects(message.get("name")):
            self.probes[message["name"]] = probe_result(message)
        elif kind == "done":
            self.done = True
        elif kind == "deadline":
            self.deadline_pending = [str(p) for p in message.get("pending") or []]

    def _expects(self, name: Any) -> bool:
        return isinstance(name, str) and (self.expected is None or name in self.expected)


def _not_json(constant: str) -> None:
    return None


def probe_result(message: dict[str, Any]) -> ProbeResult:
    """A probe message → ProbeResult, masked again: the controller trusts no host with secrets."""
    status = message.get("status")
    if status not in ("ok", "absent", "failed", "timeout"):
        status = "failed"
    data = message.get("data") if isinstance(message.get("data"), dict) else {}
    error = message.get("error")
    return ProbeResult(
        status=status,
        ok=status == "ok",
        data=_masked(data),
        error=mask_secrets(str(error)) if error is not None else None,
        elapsed_s=_number(message.get("elapsed_s")),
        output_tail=mask_secrets(str(message.get("output_tail") or ""))[-NOISE_TAIL_CHARS:],
        traceback=mask_secrets(str(message.get("traceback") or ""))[-TRACEBACK_CHARS:],
    )


def _masked(data: Any) -> Any:
    """mask_secrets(data), skipped when its JSON text might hold no secret (fleet.redact)."""
    try:
        clean = not might_hold_secret(json.dumps(data))
    except (TypeError, ValueError, RecursionError):
        clean = False
    return data if clean else mask_secrets(data)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# ---------------------------------------------------------------------------------- conclusions


@dataclass(frozen=True)
class Verdict:
    status: HostStatus
    error: str | None = None
    hint: str | None = None


def conclude(
    decoder: StreamDecoder,
    result: ExecResult | None,
    expected: list[str],
    *,
    python: str,
    timed_out: bool = False,
    interrupted: bool = False,
    timeout_s: float = 0.0,
    start_up_s: float | None = None,
) -> Verdict:
    """The host's one status, from what arrived and how the remote process ended. `start_up_s`:
    the script's start-up alarm, the host-side deadline a hung interpreter is ended by."""
    missing = [p for p in expected if p not in decoder.probes]
    if interrupted:
        return Verdict("interrupted", f"interrupted with {len(missing)} probe(s) unfinished")
    if decoder.truncated:
        return Verdict(
            "output_truncated",
            f"output passed {decoder.limit_bytes // (1024 * 1024)} MiB; channel closed",
            "run fewer probes (--probes) or find the probe that floods its result",
        )
    if decoder.hello is None and (timed_out or _stopped_by_start_up_alarm(result)):
        return _never_started(python, _start_up_deadline(result, timeout_s, start_up_s))
    if timed_out or decoder.deadline_pending is not None:
        pending = decoder.deadline_pending or missing
        return Verdict(
            "timeout",
            f"no result within {timeout_s:.0f} s from: {', '.join(pending)}",
            "raise --timeout, or leave the slow probe out with --probes",
        )
    if decoder.hello is None:
        return _no_runner(decoder, result, python)
    too_old = _older_than_supported(decoder.hello)
    if too_old:
        return Verdict(
            "no_python",
            f"{python} is Python {too_old}; the probes need 3.8+ (what ran is kept)",
            "point python: at a Python 3.8+ interpreter",
        )
    if not decoder.done:
        return _runner_died(result, missing)
    failed = [n for n, r in decoder.probes.items() if r.status in ("failed", "timeout")]
    if failed or missing:
        return Verdict("partial", "probe(s) failed: " + ", ".join(failed + missing))
    return Verdict("ok")


def _older_than_supported(hello: dict[str, Any]) -> str | None:
    """The runner's Python version when it is older than the probes' 3.8 floor."""
    version = str(hello.get("python") or "")
    try:
        parsed = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return version if parsed < MIN_PYTHON else None


TIMEOUT_EXIT = 124  # coreutils `timeout`: the command timed out (fleet.transport.launch)


def _stopped_by_start_up_alarm(result: ExecResult | None) -> bool:
    """Ended by the launcher's alarm, or by the host-side deadline (`timeout` or the watchdog:
    TERM, then KILL) around an interpreter that never said hello."""
    if result is None:
        return False
    return (
        result.exit_signal in ("SIGALRM", "SIGTERM", "SIGKILL")
        or result.exit_status == TIMEOUT_EXIT
    )


def _start_up_deadline(
    result: ExecResult | None, timeout_s: float, start_up_s: float | None
) -> float:
    """The deadline that ended an interpreter that never said hello, as it applied: the
    script's alarm (SIGALRM), the host-side `timeout` LAUNCH_GRACE_S after it (TERM, KILL, exit
    124), else the controller's own --timeout."""
    if start_up_s is None or not _stopped_by_start_up_alarm(result):
        return timeout_s
    assert result is not None  # stopped by the alarm: the process ended
    return start_up_s if result.exit_signal == "SIGALRM" else start_up_s + LAUNCH_GRACE_S


def _never_started(python: str, timeout_s: float) -> Verdict:
    """Python itself hung before running our first line of code (fleet.transport.launch.LAUNCHER)."""
    return Verdict(
        "timeout",
        f"{python} did not start the probes within {timeout_s:.0f} s",
        f"{python} hangs before our first line runs: a shim or wrapper (pyenv, conda, a `module` "
        "wrapper) waiting on a lock, a sitecustomize or .pth file in site-packages, or a stale "
        f"mount on its path; time `{python} -c pass` on the host",
    )


def _no_runner(decoder: StreamDecoder, result: ExecResult | None, python: str) -> Verdict:
    """The interpreter never said hello: missing, too old, or not Python at all."""
    stderr = (result.stderr_tail if result else "").strip()
    last = stderr.splitlines()[-1] if stderr else ""
    if result and result.exit_status is None and not stderr:
        return Verdict("unreachable", "connection lost before the probes started")
    if result and (result.exit_status == 127 or "not found" in stderr or "No such file" in stderr):
        return Verdict(
            "no_python",
            f"{python} not found on the host",
            "set python: in the inventory, e.g. python: /opt/venv/bin/python",
        )
    why = (
        last
        or decoder.noise.strip()[-200:]
        or f"exit status {result.exit_status if result else '?'}"
    )
    return Verdict(
        "no_python",
        f"{python} could not run the probes (needs Python 3.8+): {why}",
        "point python: at a Python 3.8+ interpreter",
    )


def _runner_died(result: ExecResult | None, missing: list[str]) -> Verdict:
    if result is None or result.exit_status is None:
        how = "the connection was lost"
    elif result.exit_signal:
        how = f"the runner was killed by {result.exit_signal}"
    else:
        how = f"the runner exited with status {result.exit_status}"
    tail = result.stderr_tail.strip().splitlines()[-1:] if result else []
    detail = f": {tail[0]}" if tail else ""
    return Verdict("partial", f"{how} before {', '.join(missing) or 'the end'}{detail}")


def build_outcome(
    name: str, address: str, decoder: StreamDecoder, verdict: Verdict, elapsed_s: float
) -> HostOutcome:
    python = decoder.hello.get("python") if decoder.hello else None
    return HostOutcome(
        name=name,
        status=verdict.status,
        address=address,
        error=mask_secrets(verdict.error) if verdict.error else None,
        hint=verdict.hint,
        elapsed_s=round(elapsed_s, 3),
        python=str(python) if python else None,
        probes=dict(decoder.probes),
    )
