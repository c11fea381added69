"""The host runner's fork server for the probes that declare `PRELOAD = ("torch",)`.

A runner module (probes/runner/_host_runner.py, RUNNER_MODULES): it travels in every bundle and the
runner makes it importable by name before it imports it. Stdlib only, Python 3.8+ (and it still
loads on 3.6/3.7, so that the runner can say it needs 3.8).
"""

import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, List, NoReturn

if TYPE_CHECKING:  # mypy reads them as probes' modules; on the host they are top-level modules
    from probes.runner._runner_child import child_main, die_with_parent, forget_child_exits
    from probes.runner._runner_processes import ProbeProcess
else:
    from _runner_child import child_main, die_with_parent, forget_child_exits
    from _runner_processes import ProbeProcess


class Preloader:
    """A fork server for the probes that declare `PRELOAD = ("torch",)`.

    Four probes importing torch each cost four cold imports (~3–5 s of CPU apiece on a GPU host).
    Instead one child imports the modules once, then forks each of those probes from that warm
    state. The runner becomes their subreaper (PR_SET_CHILD_SUBREAPER), so the probes end up its
    own children and are watched, timed and killed like any other. The preloader never runs probe
    code itself; if it dies (a crash inside `import torch`), its probes are started the ordinary
    way and each reports its own failure: a failed preload costs time, never results.
    """

    def __init__(self, procs: List[ProbeProcess], modules: List[str]) -> None:
        self.procs = {p.name: p for p in procs}
        status_r, status_w = os.pipe()
        runner_pid = os.getpid()
        sys.stdout.flush()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(status_r)
            preloader_main(list(procs), modules, status_w, runner_pid)
        os.close(status_w)
        for proc in procs:
            proc.close_write_ends()
        self.status_fd = status_r
        self.pending = set(self.procs)
        self._buffer = b""

    def on_readable(self) -> bool:
        """Read pid announcements; return False at end of file (the preloader is done or dead)."""
        chunk = os.read(self.status_fd, 4096)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            name, _, pid = line.decode("ascii", "replace").partition(" ")
            if name in self.pending and pid.isdigit():
                self.procs[name].pid = int(pid)
                self.pending.discard(name)
        return bool(chunk)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.status_fd)


def become_subreaper() -> bool:
    """Orphaned descendants get re-parented to us (Linux PR_SET_CHILD_SUBREAPER)."""
    try:
        import ctypes

        status: int = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
        return status == 0
    except Exception:  # not Linux, or no libc: probes are then forked the ordinary way
        return False


def preloader_main(
    procs: List[ProbeProcess], modules: List[str], status_w: int, runner_pid: int
) -> NoReturn:
    """In the preloader: import `modules` once, fork each probe from here, never return."""
    try:
        os.setpgid(0, 0)
        die_with_parent()
        forget_child_exits()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # whatever an import prints must not reach the channel
            os.dup2(devnull, fd)
        for proc in procs:
            os.close(proc.result_fd)
            os.close(proc.output_fd)
        for module in modules:
            try:
                __import__(module)
            except BaseException:  # the probes will meet the same error and report it
                pass
        for proc in procs:
            fork_adopted_probe(proc, procs, status_w, runner_pid)
    finally:
        os._exit(0)


def fork_adopted_probe(
    proc: ProbeProcess, procs: List[ProbeProcess], status_w: int, runner_pid: int
) -> None:
    """Double fork: the middle process exits at once, so the probe is re-parented to the runner."""
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)
        proc.close_write_ends()
        return
    probe_pid = os.fork()
    if probe_pid:
        os.write(status_w, ("%s %d\n" % (proc.name, probe_pid)).encode("ascii"))
        os._exit(0)
    os.setpgid(0, 0)  # at once: stopping the preloader kills its group, and this is not in it
    os.close(status_w)
    for other in procs:
        if other is not proc:
            other.close_write_ends()  # or other probes' pipes would never see end-of-file
    deadline = time.monotonic() + 2.0
    while os.getppid() != runner_pid and time.monotonic() < deadline:
        time.sleep(0.001)
    child_main(proc.name, proc.source, proc.options, *proc.write_fds)
