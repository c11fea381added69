"""The host runner's view of its probes: one forked child per probe, what it left behind judged.

A runner module (probes/runner/_host_runner.py, RUNNER_MODULES): it travels in every bundle and the
runner makes it importable by name before it imports it. ProbeProcess forks the child
(probes/runner/_runner_child.py), reads its pipes, kills and reaps it, and turns what it left (an exit
status, a result, a crash) into the probe's protocol line, masked. ChildExits wakes the
scheduler when a child exits. Stdlib only, Python 3.8+ (and it still loads on 3.6/3.7, so that
the runner can say it needs 3.8).
"""

import contextlib
import json
import os
import re
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

if TYPE_CHECKING:  # mypy reads them as probes' modules; on the host they are top-level modules
    from probes.runner._runner_child import TRACEBACK_CHARS, Options, child_main
    from probes.runner._runner_secrets import mask_secrets
else:
    from _runner_child import TRACEBACK_CHARS, Options, child_main
    from _runner_secrets import mask_secrets

DEFAULT_PROBE_TIMEOUT_S = 60.0
RESULT_LIMIT_BYTES = 8 * 1024 * 1024
OUTPUT_TAIL_BYTES = 2048
READ_CHUNK = 65536

Message = Dict[str, Any]  # one protocol line
# status, ok, data, error (what the probe said), and the traceback's tail when it raised
Verdict = Tuple[str, bool, Dict[str, Any], Any, str]


def read_timeout(source: str) -> float:
    match = re.search(r"^TIMEOUT_S\s*=\s*([0-9.]+)", source, re.MULTILINE)
    return float(match.group(1)) if match else DEFAULT_PROBE_TIMEOUT_S


class ProbeProcess:
    """A running probe seen from the parent: its pid, its pipes and what they have said so far."""

    def __init__(self, name: str, source: str, options: Options, fork: bool = True) -> None:
        self.name, self.source, self.options = name, source, options
        self.started = time.monotonic()
        self.deadline = self.started + float(options.get("timeout_s") or read_timeout(source))
        result_r, result_w = os.pipe()
        output_r, output_w = os.pipe()
        self.result_fd, self.output_fd = result_r, output_r
        self.write_fds = (result_w, output_w)
        self.pid: Optional[int] = (
            None  # without fork: the Preloader forks it and says its pid later
        )
        if fork:
            sys.stdout.flush()
            self.pid = os.fork()
            if self.pid == 0:
                os.close(result_r)
                os.close(output_r)
                child_main(name, source, options, result_w, output_w)
            self.close_write_ends()

    def close_write_ends(self) -> None:
        for fd in self.write_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.result = bytearray()
        self.result_overflow = False
        self.output_tail = b""
        self.exit_status: Optional[int] = None

    def on_readable(self, fd: int) -> bool:
        """Read one chunk; return False at end of file."""
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return False
        if fd == self.output_fd:
            self.output_tail = (self.output_tail + chunk)[-OUTPUT_TAIL_BYTES:]
        elif len(self.result) + len(chunk) > RESULT_LIMIT_BYTES:
            self.result_overflow = True
        else:
            self.result.extend(chunk)
        return True

    def poll_exit(self) -> bool:
        if self.exit_status is None and self.pid is not None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # a preloaded probe not yet adopted by us
                return False
            if pid:
                self.exit_status = status
        return self.exit_status is not None

    def kill(self) -> None:
        """Kill the probe and everything it started (its process group), then reap it."""
        if self.pid is None:
            return  # never started: the Preloader that would have forked it is killed instead
        for kill in (os.killpg, os.kill):  # the group, then the probe itself should it have left it
            with contextlib.suppress(OSError):
                kill(self.pid, signal.SIGKILL)
        if self.exit_status is None:
            try:
                self.exit_status = os.waitpid(self.pid, 0)[1]
            except OSError:
                self.exit_status = 0

    def report(self, timed_out: bool = False) -> Message:
        elapsed = round(time.monotonic() - self.started, 3)
        status, ok, data, error, tail = judge(self, timed_out)
        message = {
            "type": "probe",
            "name": self.name,
            "status": status,
            "ok": ok,
            "data": mask_secrets(data),
            "error": mask_secrets(error),
            "elapsed_s": elapsed,
            "output_tail": mask_secrets(self.output_tail.decode("utf-8", "replace")),
        }
        if tail:
            message["traceback"] = mask_secrets(tail)
        return message


def judge(proc: ProbeProcess, timed_out: bool) -> Verdict:
    """Turn what a child left behind into (status, ok, data, error, traceback tail)."""
    if timed_out:
        return (
            "timeout",
            False,
            {},
            "probe timed out after %.0f s" % (proc.deadline - proc.started),
            "",
        )
    status = proc.exit_status or 0
    if os.WIFSIGNALED(status):
        return (
            "failed",
            False,
            {},
            "probe killed by signal %s" % signal_name(os.WTERMSIG(status)),
            "",
        )
    if os.WEXITSTATUS(status) != 0:
        return "failed", False, {}, "probe exited with code %d" % os.WEXITSTATUS(status), ""
    if proc.result_overflow:
        return "failed", False, {}, "probe result larger than %d bytes" % RESULT_LIMIT_BYTES, ""
    return judge_payload(bytes(proc.result))


def judge_payload(raw: bytes) -> Verdict:
    try:
        payload = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return "failed", False, {}, "probe ended without a result", ""
    if "crash" in payload:
        lines = str(payload["crash"]).strip().splitlines()
        raised = lines[-1] if lines else "an exception"
        at = " (%s)" % payload["at"] if payload.get("at") else ""
        tail = payload.get("traceback")
        tail = tail[-TRACEBACK_CHARS:] if isinstance(tail, str) else ""
        return "failed", False, {}, "probe raised %s%s" % (raised, at), tail
    result = payload.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
        return (
            "failed",
            False,
            {},
            "probe returned %.80r, not {'ok': bool, 'data': ...}" % (result,),
            "",
        )
    data = result.get("data")
    if not isinstance(data, dict):
        data = {}
    error = result.get("error")
    return ("ok" if result["ok"] else "absent"), result["ok"], data, error, ""


def signal_name(number: int) -> str:
    try:
        return "%d (%s)" % (number, signal.Signals(number).name)
    except ValueError:
        return str(number)


# ------------------------------------------------------------------------------ child exits


def on_child_exit(signum: int, frame: object) -> None:
    """Nothing to do here: the signal's byte on the wakeup fd is what wakes the scheduler."""


class ChildExits:
    """Wakes the scheduler's select() when a child exits: SIGCHLD, through signal.set_wakeup_fd.

    A probe closes its result pipe a moment before it exits; without this wake-up its exit is only
    seen at the next select() timeout, up to HEARTBEAT_S / 4 later, and the last probe to end is
    on every host's critical path. Where the wakeup fd cannot be set (not the main thread), the
    timeout still finds every exit, only later.
    """

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)
        self.installed = False
        try:
            self.previous_fd = signal.set_wakeup_fd(self.write_fd)
            self.previous_handler = signal.signal(signal.SIGCHLD, on_child_exit)
            self.installed = True
        except ValueError:  # not the main thread
            pass

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.read_fd, 4096):
                pass

    def close(self) -> None:
        if self.installed:
            signal.signal(signal.SIGCHLD, self.previous_handler)
            signal.set_wakeup_fd(self.previous_fd)
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
