"""The runner hears its children exit (SIGCHLD through the wakeup fd) instead of finding out at
its next select() timeout, and a probe that initialises CUDA starts cuInit beside its imports."""

from __future__ import annotations

import os
import select
import signal
import threading

import pytest

from tests.runner.conftest import run_probes
from tests.runner.helpers import GOOD, load_runner

INITS_CUDA = """
import threading
INITS_CUDA = True
def collect(options):
    return {"ok": True, "data": {"threads": [t.name for t in threading.enumerate()]}}
"""


def test_a_child_exit_wakes_the_scheduler_and_close_restores_what_was_there() -> None:
    processes = load_runner("_runner_processes.py")
    before = signal.getsignal(signal.SIGCHLD)
    exits = processes.ChildExits()
    try:
        assert exits.installed
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        readable, _, _ = select.select([exits.read_fd], [], [], 30)
        assert readable == [exits.read_fd]  # the exit's signal put a byte on the wakeup fd
        exits.drain()
        assert select.select([exits.read_fd], [], [], 0)[0] == []  # drained, not stuck readable
        os.waitpid(pid, 0)
    finally:
        exits.close()
    assert signal.getsignal(signal.SIGCHLD) == before
    assert signal.set_wakeup_fd(-1) == -1  # none was set before; none is left


def test_a_forked_child_forgets_the_runners_wakeup() -> None:
    exits = load_runner("_runner_processes.py").ChildExits()
    child = load_runner("_runner_child.py")
    try:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            child.forget_child_exits()
            handler = signal.getsignal(signal.SIGCHLD)
            os.write(write_fd, b"1" if handler == signal.SIG_DFL else b"0")
            os._exit(0 if signal.set_wakeup_fd(-1) == -1 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.read(read_fd, 1) == b"1"  # SIGCHLD back to its default in the child
        assert os.WEXITSTATUS(status) == 0  # and no wakeup fd of the runner's
    finally:
        exits.close()


def test_probes_that_initialise_cuda_are_started_first() -> None:
    runner = load_runner()
    probes = {"a": GOOD, "b": GOOD, "cuda": INITS_CUDA}
    scheduler = runner.Scheduler(probes, {}, parallel=1, preload=False)
    try:
        assert scheduler.queue == ["cuda", "a", "b"]
    finally:
        scheduler.close()


def test_start_cuda_init_calls_cuinit_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    child = load_runner("_runner_child.py")
    called: list[tuple[str, int, str]] = []
    done = threading.Event()

    class FakeDriver:
        def __init__(self, name: str) -> None:
            self.name = name

        def cuInit(self, flags: int) -> int:  # the driver's own name
            called.append((self.name, flags, threading.current_thread().name))
            done.set()
            return 0

    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", FakeDriver)
    child.start_cuda_init()
    assert done.wait(30)
    assert called == [("libcuda.so.1", 0, "cuInit")]


def test_start_cuda_init_without_a_driver_leaves_the_probe_to_say_so() -> None:
    """No libcuda here (CI): the thread ends quietly, the probe runs and reports as usual."""
    outcome = run_probes({"cuda": INITS_CUDA, "plain": GOOD})["local"]
    assert outcome.status == "ok", outcome
    assert outcome.probes["cuda"].status == "ok", outcome.probes["cuda"]
    assert outcome.probes["plain"].data == {"answer": 42}
