"""`Match exec`, run as OpenSSH runs it (readconf.c's match_cfg_line and execute_in_shell): the
command line of the user's own config, its %-tokens expanded as ssh expands them, handed to the
user's shell (`$SHELL -c COMMAND`, /bin/sh when SHELL is unset) with stdin and stdout on
/dev/null, from the controller; exit status 0 is a match.

Unlike ssh, each distinct command line runs once per fleet invocation (the answer is kept for
every host and pass that asks again), and under a timeout: a command still running after
EXEC_TIMEOUT_S is killed and the hosts that reach it are refused, naming its line (ssh would
still be waiting: taking it as either answer could send a host by a route ssh never takes). A
command that cannot run (the shell is not executable, a signal ended it) refuses every host that reaches it,
as ssh would stop there. With `--no-ssh-exec` (or `ssh_exec: false` in a fleet inventory) nothing
runs: a block such a line decides is undecided, and the hosts it would set something for are
refused, naming the line.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

EXEC_TIMEOUT_S = 10.0


@dataclass
class MatchExec:
    """Runs Match exec command lines (or refuses to), each distinct one once."""

    enabled: bool = True
    timeout_s: float = EXEC_TIMEOUT_S
    warnings: list[str] = field(default_factory=list)
    _answers: dict[str, bool | str] = field(default_factory=dict, repr=False)

    def __call__(self, command: str, place: str) -> bool | str | None:
        """True when `command` exits 0, False when it exits otherwise; None when fleet was told
        to run no command; why, when it cannot run or did not end in time."""
        if not self.enabled:
            return None
        if command not in self._answers:
            self._answers[command] = self._run(command, place)
        return self._answers[command]

    def _run(self, command: str, place: str) -> bool | str:
        shell = os.environ.get("SHELL") or "/bin/sh"
        if not os.access(shell, os.X_OK):
            return f'{place}: Match exec {command!r}: shell "{shell}" is not executable'
        log.debug("%s: Match exec: running %s -c %r", place, shell, command)
        try:
            status, stderr = _shell(shell, command, self.timeout_s)
        except subprocess.TimeoutExpired:
            return (
                f"{place}: Match exec {command!r} still ran after {self.timeout_s:g} s"
                " (killed): fleet cannot tell which route ssh would take"
            )
        except OSError as exc:
            return f"{place}: Match exec {command!r}: {shell} did not start: {exc.strerror}"
        log.debug(
            "%s: Match exec %r: exit status %d%s",
            place,
            command,
            status,
            f" ({stderr[-200:]})" if stderr else "",
        )
        if status < 0:  # ssh: "exited abnormally", and it stops there
            return f"{place}: Match exec {command!r} ended by signal {-status}"
        return status == 0


def _shell(shell: str, command: str, timeout_s: float) -> tuple[int, str]:
    """`shell -c command` (stdin and stdout on /dev/null, as ssh): its exit status (negative: the
    signal) and stderr. On timeout the whole process group is killed, children too."""
    with subprocess.Popen(
        [shell, "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, so a timeout kills what it started
    ) as process:
        try:
            _, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return process.returncode, stderr.decode(errors="replace").strip()
