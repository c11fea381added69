"""The seed of the worker processes (execution/workers.py has the why): a fresh interpreter that
reads its SeedJob on stdin, imports what a worker needs once and reads what every worker would
read alike (known_hosts, identity files: SshTransports.prepared), forks the workers while it has
no thread and no event loop, and reaps them, saying on stdout, a JSON line each, when a worker
started (its pid) and how it ended (`exited with status 1`, `was killed by SIGKILL`).

Each worker runs a plain FanOut over its hosts in its own event loop and streams its events and
outcomes to the parent as frames (workers.frame). Closing its stop pipe (the parent on Ctrl-C,
or the parent gone) interrupts it: its unfinished hosts end as `interrupted`, with whatever they
had reported, and their sessions and remote processes are ended, as the single process does.
Ctrl-C itself is the parent's to act on: the seed and the workers ignore SIGINT (SEED_CODE's
first line). The seed may be started before its job is known (ProbePlan.make): it
imports all it needs, then waits for the job.

FLEET_WORKER_PROFILE=FOLDER: each worker writes its CPU profile (cProfile, process time) to
FOLDER/worker-INDEX.prof; the parent's own CPU is seen from outside, a worker's is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import logging
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from fleet.execution.fanout import Events, FanOut
from fleet.execution.timeline import HostClock
from fleet.execution.workers import SeedJob, WorkerJob, frame
from fleet.models import Host, HostOutcome
from fleet.transport.ssh import SSHTransport

PRELOADED = ("fleet.transport.ssh",)  # imported once here, not once per worker
PROFILE_ENV = "FLEET_WORKER_PROFILE"  # a folder: each worker writes its cProfile there


def main() -> None:
    clock = HostClock.from_env("seed")  # its imports done: the start of `started`
    try:
        job: SeedJob = pickle.load(sys.stdin.buffer)  # started early, it waits here for its job
    except EOFError:
        return  # the parent ended (or needed no worker) before it had a job for us
    for fd in job.unused_fds:  # pipes of workers it was started for and not given
        os.close(fd)
    for module in PRELOADED:
        importlib.import_module(module)
    # known_hosts and keys read once here, not once per worker: shared with them, page for page
    transport = job.transports.prepared([h for worker in job.workers for h in worker.hosts])
    gc.freeze()  # what is imported stays shared with the workers, page for page
    gc.enable()  # SEED_CODE paused it over the imports; the workers collect as usual
    if clock is not None:
        clock.mark("forking")
    started = {start_worker(job, worker, transport): worker.index for worker in job.workers}
    if clock is not None:
        clock.write()  # the seed's CPU until it forked every worker
    for worker in job.workers:
        os.close(worker.stream_fd)
        os.close(worker.stop_fd)
    while started:
        pid, status = os.wait()
        if pid in started:
            report_to_parent(
                {"worker": started.pop(pid), "pid": pid, "ended": how_it_ended(status)}
            )


def start_worker(job: SeedJob, worker: WorkerJob, transport: SSHTransport) -> int:
    sys.stdout.flush()  # nothing buffered is written twice
    pid = os.fork()
    if pid == 0:
        os._exit(run_worker(job, worker, transport))
    report_to_parent({"worker": worker.index, "pid": pid})
    return pid


def report_to_parent(line: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the parent gone: its workers still end their hosts
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def how_it_ended(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def run_worker(job: SeedJob, worker: WorkerJob, transport: SSHTransport) -> int:
    """In the forked worker: its hosts' fan-out; the exit status (1: it raised, said on stderr)."""
    for other in job.workers:
        if other.index != worker.index:
            os.close(other.stream_fd)
            os.close(other.stop_fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # stdout is the seed's report to the parent
    log_like_parent(job.log_level, worker.index)
    try:
        profiled(lambda: asyncio.run(fan_out_in_worker(job, worker, transport)), worker.index)
    except BaseException:  # noqa: BLE001 - said, and the parent makes it its hosts' error
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


def profiled(work: Callable[[], None], index: int) -> None:
    """`work`, under cProfile when FLEET_WORKER_PROFILE names a folder: each worker's profile is
    written there as worker-INDEX.prof (where a worker's CPU goes is not seen from the parent)."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        work()
        return
    import cProfile

    profile = cProfile.Profile(time.process_time)  # CPU, not the waits on the hosts
    try:
        profile.runcall(work)
    finally:
        profile.dump_stats(os.path.join(folder, f"worker-{index}.prof"))


def log_like_parent(level: int, index: int) -> None:
    """The parent's --debug: its `fleet` logger's level, said on stderr, each line marked."""
    logger = logging.getLogger("fleet")
    logger.setLevel(level)
    if level < logging.WARNING:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"worker {index}: %(name)s: %(message)s"))
        logger.addHandler(handler)


async def fan_out_in_worker(job: SeedJob, worker: WorkerJob, transport: SSHTransport) -> None:
    interrupt = asyncio.Event()
    stream = await FrameWriter.open(worker.stream_fd)
    await watch_stop(worker.stop_fd, interrupt)
    hosts = list(worker.hosts)
    on_key = lambda line: stream.send(("key", line))  # noqa: E731
    async with job.transports.open(on_key, transport) as transports:
        fan = FanOut(job.bundle, transports, worker.settings, RelayEvents(stream), interrupt)
        await fan.run(hosts)
    stream.send(("done",))
    await stream.close()


class StopWatch(asyncio.Protocol):
    """The stop pipe: anything on it, or its end, interrupts the worker's hosts."""

    def __init__(self, interrupt: asyncio.Event) -> None:
        self.interrupt = interrupt

    def data_received(self, data: bytes) -> None:
        self.interrupt.set()

    def eof_received(self) -> bool | None:
        self.interrupt.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.interrupt.set()


async def watch_stop(fd: int, interrupt: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: StopWatch(interrupt), pipe)


class FrameWriter(asyncio.Protocol):
    """The worker's stream to the parent: frames gathered over one turn of the loop, written as
    one (a host's events come in bursts), never blocking the loop."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.transport: asyncio.WriteTransport | None = None
        self.closed = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(cls, fd: int) -> FrameWriter:
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(fd, "wb", buffering=0)
        _, writer = await loop.connect_write_pipe(cls, pipe)
        return writer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)  # the parent is gone: what is left to say is dropped

    def send(self, message: object) -> None:
        if not self.parts:
            asyncio.get_running_loop().call_soon(self.flush)
        self.parts.append(frame(message))

    def flush(self) -> None:
        parts, self.parts = self.parts, []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(parts))

    async def close(self) -> None:
        self.flush()
        if self.transport is not None:
            self.transport.close()  # after what is buffered is written
        await self.closed


class RelayEvents(Events):
    """The fan-out's events, as frames to the parent (which relays them to its own Events)."""

    def __init__(self, stream: FrameWriter) -> None:
        self.stream = stream

    def host_connecting(self, host: Host) -> None:
        self.stream.send(("connecting", host.name))

    def host_running(self, host: Host) -> None:
        self.stream.send(("running", host.name))

    def probes_running(self, host: Host, probes: Sequence[str]) -> None:
        self.stream.send(("probes", host.name, list(probes)))

    def probe_finished(self, host: Host, probe: str, status: str) -> None:
        self.stream.send(("probe", host.name, probe, status))

    def host_finished(self, outcome: HostOutcome) -> None:
        self.stream.send(("finished", outcome))
