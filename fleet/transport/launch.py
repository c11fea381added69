"""The launch seam: how every script fleet sends reaches a host's Python, and nothing else.

One module for both ends of the launch line, used by every transport (local, ssh, slurm), by the
probe bundle (fleet/execution/bundle.py) and by `fleet fabric` (fleet/fabric/launch.py):

- the script's first line, its start-up alarm (`with_alarm`, read back by `start_up_alarm`);
- the launcher, `<python> -S -c LAUNCHER`, which sets that alarm before `site` runs (Slurm's:
  ZLIB_LAUNCHER, for a script whose body is compressed, `compressed_script`);
- the POSIX-sh wrapper around the interpreter (`launch_argv`), which bounds it from outside;
- the wrapper's own first output line, the process group to end (`LaunchReport`, `launch_pgid`).

It imports nothing of fleet but the transports' sink type: execution/ and fabric/ build on it,
and it builds on neither.
"""

from __future__ import annotations

import json
import math
import zlib

from fleet.transport.base import OutputSink

# A script's first line: `# fleet start-up alarm, seconds: N`. A comment, so the script still runs
# as it is under plain `python -`; the launcher reads its last word.
ALARM_HEAD = "# fleet start-up alarm, seconds: "

# How every transport starts a script. The launcher reads the script's first line (its alarm) and
# sets that alarm before site-packages are imported: a sitecustomize, a .pth file or a hung mount
# that blocks Python's start then cannot outlive the run on the host, even where sshd will not
# deliver our signals. Then `site` runs as usual and the script runs as `__main__`, as under
# `python -`. Python 2 gets as far as compiling the script: a SyntaxError.
_LAUNCHER = (  # {imports}: after the alarm is set; {body}: the script's rest, as source bytes
    "import signal,sys;_in=getattr(sys.stdin,'buffer',sys.stdin);_head=_in.readline();"
    "signal.alarm(int(_head.split()[-1]));import {imports};site.main();"
    "exec(compile(_head+{body},'<fleet bundle>','exec'))"
)
LAUNCHER = _LAUNCHER.format(imports="site", body="_in.read()")
LAUNCH_ARGS = ("-S", "-c", LAUNCHER)

# The Slurm transport's launcher: LAUNCHER for a script whose body, all but the alarm line, is
# zlib-compressed (`compressed_script`). srun copies its stdin to every node in 1 KiB messages: each
# byte costs the controller's srun once per node, and the bundle compresses to a third. zlib is in
# the standard library of every Python 3 (built in, or in lib-dynload, which -S keeps on the path);
# like site, it is imported after the alarm is set.
ZLIB_LAUNCHER = _LAUNCHER.format(imports="zlib,site", body="zlib.decompress(_in.read())")
ZLIB_LAUNCH_ARGS = ("-S", "-c", ZLIB_LAUNCHER)

# Seconds between the script's own alarm and the host-side `timeout` (TERM), and again until KILL.
# The alarm (and the host runner's deadline, set from it) normally ends a run first; `timeout` is
# the backstop for what happens before Python runs our first line.
LAUNCH_GRACE_S = 2

# The interpreter runs under this POSIX-sh wrapper: `sh -c LAUNCH_WRAPPER fleet-launch DEADLINE
# GRACE PYTHON ARGS...`. An interpreter that is a shim (pyenv, conda waiting on a lock, a `module`
# wrapper, a stuck automount) hangs before the launcher's alarm is set; under coreutils `timeout -k`
# it and everything it started in its process group get TERM at DEADLINE and KILL GRACE seconds
# later, whether or not the controller is still there (sshd delivers no signals to root sessions
# before OpenSSH 10, and a closed channel kills nothing). `timeout` makes itself the leader of a
# process group whose id is its pid: the wrapper reports it first (`{"type":"launch","pgid":N}`),
# so the controller can end that group over a second channel at its own deadline. Without a
# working `timeout` (not in coreutils before 7.0; old busybox lacks -k), a background watchdog
# kills the wrapper's process group instead (its session under sshd). `timeout` is not wrapped in
# setsid(1): it would fork where the wrapper already leads a process group (the usual case under
# sshd), and the exit status would then be lost. A leading ~/ is the remote user's home. One line,
# no single quote: csh and fish login shells get it as one quoted word.
LAUNCH_WRAPPER = (
    "d=$1; g=$2; p=$3; shift 3; "
    'case $p in "~/"*) p=$HOME/${p#"~/"};; esac; '
    "if timeout -k 1 9 true >/dev/null 2>&1; then "
    r'printf "{\"type\":\"launch\",\"pgid\":%d}\n" $$; '
    'exec timeout -k "$g" "$d" "$p" "$@"; fi; '
    '(trap "" TERM; n=0; while kill -0 $$; do if [ $n -ge "$d" ]; then '
    'kill -TERM 0; sleep "$g"; kill -KILL 0; fi; sleep 1; n=$((n+1)); done) '
    "</dev/null >/dev/null 2>&1 & "
    'exec "$p" "$@"'
)
LAUNCH_NAME = "fleet-launch"  # $0 of the wrapper: what `ps` shows until the interpreter runs
MAX_LAUNCH_LINE = 256


def with_alarm(body: str, seconds: float) -> bytes:
    """A whole script: the start-up alarm line (whole seconds, at least 1), then `body`."""
    return f"{ALARM_HEAD}{max(1, math.ceil(seconds))}\n{body}".encode()


def start_up_alarm(script: bytes) -> int:
    """The alarm seconds on the script's first line (written by `with_alarm`, read by LAUNCHER)."""
    head = script.split(b"\n", 1)[0]
    if not head.startswith(ALARM_HEAD.encode()):
        raise ValueError("not a fleet script: its first line is not the start-up alarm")
    return int(head.split()[-1])


def compressed_script(script: bytes) -> bytes:
    """`script` for ZLIB_LAUNCHER: its alarm line as it is, then the rest zlib-compressed."""
    start_up_alarm(script)  # a fleet script, or a ValueError
    head, _, body = script.partition(b"\n")
    return head + b"\n" + zlib.compress(body, 9)


def launch_argv(python: str, script: bytes) -> list[str]:
    """How the local and SSH transports start `script` (on stdin) with `python`, as an argv for
    exec: the interpreter under LAUNCH_WRAPPER, which ends it LAUNCH_GRACE_S after the script's
    start-up alarm. (Slurm runs `python` with LAUNCH_ARGS under its own wrapper: srun's --time is
    its outer bound.)"""
    deadline = start_up_alarm(script) + LAUNCH_GRACE_S
    return [
        "sh",
        "-c",
        LAUNCH_WRAPPER,
        LAUNCH_NAME,
        str(deadline),
        str(LAUNCH_GRACE_S),
        python,
        *LAUNCH_ARGS,
    ]


class LaunchReport:
    """A sink in front of another that reads LAUNCH_WRAPPER's first line,
    `{"type":"launch","pgid":N}`: the process group to end on the host when we give up on it.
    Every byte still goes to the sink behind it."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink
        self.pgid: int | None = None
        self._head: bytes | None = b""  # None once the first line has been read

    def __call__(self, chunk: bytes) -> bool:
        if self._head is not None:
            self._read_head(chunk)
        return self.sink(chunk)

    def _read_head(self, chunk: bytes) -> None:
        assert self._head is not None
        self._head += chunk
        line, newline, _ = self._head.partition(b"\n")
        if newline or len(self._head) > MAX_LAUNCH_LINE:
            self.pgid = launch_pgid(line[:MAX_LAUNCH_LINE])
            self._head = None


def launch_pgid(line: bytes) -> int | None:
    """The process group in a launch line; None for anything else. Group ids 0 and 1 are never
    ours to end (`kill -TERM -1` would reach every process of the user)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("type") != "launch":
        return None
    pgid = message.get("pgid")
    valid = isinstance(pgid, int) and not isinstance(pgid, bool) and 1 < pgid < 2**31
    return pgid if valid else None
