"""The fan-out over worker processes: the controller on every core.

A host costs the controller about 5 ms of CPU (its handshake, its session, reading its results),
almost all of it in one event loop: one core. `--workers N` deals the SSH hosts out to N worker
processes, each with its own event loop, its own SSH connections and its own FanOut
(execution/fanout.py), all bounded by their share of the controller's limits (handshakes, sessions,
`--concurrency`, the open-file budget). Each worker streams its events and HostOutcomes back as
they happen; this side relays them to the parent's Events (progress, the rule pack's start) and
keeps the outcomes, so the run document is made and written here, host by host, as without workers.

How the workers start, and why so: the parent already runs an event loop and threads (the progress
display, the rule pack read while the hosts run), so it must not fork; `spawn` would re-import
fleet, asyncssh and cryptography in every worker (a few hundred ms of CPU each: at 125 hosts per
worker, more than the hosts' own work). So one fresh interpreter, the seed (execution/seed.py),
is started as a plain subprocess: it imports all a worker needs once, while it has no thread and
no loop, then forks the workers and reaps them (so that their CPU is counted in the controller's
process tree, as wait4 sees it, and each death is reported with its cause). multiprocessing's
forkserver does the same but leaves its server and the workers' accounting outside the parent's
tree. Messages are length-prefixed pickles over plain pipes: one pipe per worker for its stream,
one per worker whose closing tells it to stop (Ctrl-C here, or this process gone).

A worker that dies is a host error for the hosts it had not finished (`unreachable`, naming the
worker and how it died), never a lost run. Hosts that are not SSH hosts (this machine, Slurm's one
step) always run in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.execution.bundle import Bundle
from fleet.execution.fanout import Events, RunSettings
from fleet.execution.limits import (
    RESERVED_FDS,
    FanLimits,
    default_handshakes,
    plan_limits,
    raise_open_file_limit,
    usable_cores,
)
from fleet.execution.timeline import HostClock
from fleet.models import Host, HostOutcome
from fleet.transport.base import Transport

if TYPE_CHECKING:  # asyncssh is imported where SSH runs (the seed), not where workers are planned
    from fleet.transport.ssh import SSHTransport

log = logging.getLogger(__name__)

MIN_HOSTS_PER_WORKER = 64  # by default, fewer hosts than this per worker: fewer workers
SPREAD_TRANSPORTS = frozenset({"ssh"})  # what workers run; the rest stays in this process
DEATH_REPORT_WAIT_S = 2.0  # a worker's stream ended early: how long to wait for the seed's word
STOP_GRACE_S = 20.0  # after Ctrl-C, how long workers have to end their hosts before SIGKILL
FRAME_HEAD = struct.Struct("!I")

# The collector paused over the seed's imports (a few hundred modules, no garbage: about a sixth
# of their CPU, as fleet.collector says of the executable's); seed.main freezes and resumes it.
# SIGINT ignored from the first line: Ctrl-C is the parent's to act on, even while the seed imports.
SEED_CODE = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import gc; gc.disable(); "
    "from fleet.execution.seed import main; main()"
)
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the seed imports this very fleet


def worker_count(
    requested: int | None, hosts: int, concurrency: int | None = None, cores: int | None = None
) -> int:
    """Workers for `hosts` spread hosts: `requested` (at most one per host), or by default one per
    core with at least MIN_HOSTS_PER_WORKER hosts each; never more than `--concurrency`. 1: no
    worker process at all (the fan-out runs in this process, as it always did)."""
    if requested is None:
        count = min(cores or usable_cores(), hosts // MIN_HOSTS_PER_WORKER)
    else:
        count = min(requested, hosts)
    if concurrency is not None:
        count = min(count, concurrency)
    return max(1, count)


def spread(hosts: Sequence[Host]) -> tuple[list[Host], list[Host]]:
    """The hosts workers may run (SSH), and those that stay in this process."""
    remote = [h for h in hosts if h.transport in SPREAD_TRANSPORTS]
    return remote, [h for h in hosts if h.transport not in SPREAD_TRANSPORTS]


def deal(hosts: Sequence[Host], count: int) -> list[list[Host]]:
    """Round robin: each worker gets every count-th host (neighbours in an inventory often share a
    rack, a bastion or a slow network; dealt out, no worker gets all the slow ones)."""
    return [list(hosts[index::count]) for index in range(count)]


def share_settings(settings: RunSettings, count: int, open_files: int) -> RunSettings:
    """One worker's share of the controller's bounds: handshakes, --concurrency, open files."""
    handshakes = settings.handshakes or default_handshakes()
    concurrency = settings.concurrency
    return replace(
        settings,
        handshakes=max(1, handshakes // count),
        concurrency=None if concurrency is None else max(1, concurrency // count),
        open_files=max(RESERVED_FDS + 1, open_files // count),
    )


def frame(message: object) -> bytes:
    """One message on a worker's stream: its length, then its pickle. Pickle, because the messages
    are fleet's own dataclasses between processes of one controller (never from a host)."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME_HEAD.pack(len(body)) + body


class FrameReader(asyncio.Protocol):
    """A worker's stream, read as frames: each message to `deliver`; `ended` once it is closed."""

    def __init__(self, deliver: Callable[[Any], None]) -> None:
        self.deliver = deliver
        self.buffer = bytearray()
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        start, size = 0, len(self.buffer)
        while size - start >= FRAME_HEAD.size:
            (length,) = FRAME_HEAD.unpack_from(self.buffer, start)
            end = start + FRAME_HEAD.size + length
            if end > size:
                break
            self.deliver(pickle.loads(memoryview(self.buffer)[start + FRAME_HEAD.size : end]))
            start = end
        del self.buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


@dataclass(frozen=True)
class SshTransports:
    """How a worker opens its hosts' transport (SSH: the only kind workers run), as the
    single process does (fleet.api.probing.make_transports); host keys --accept-new records are
    said through `on_key_recorded` (the worker relays them to the parent)."""

    accept_new: bool
    fleet_known_hosts: Path  # fleet's own known_hosts, where --accept-new writes

    def prepared(self, hosts: Sequence[Host]) -> SSHTransport:
        """The transport with every file `hosts` read alike already read (known_hosts, identity
        files): the seed makes it once, before it forks, and every worker starts from it."""
        from fleet.transport.ssh import SSHOptions, SSHTransport

        options = SSHOptions(accept_new=self.accept_new, fleet_known_hosts=self.fleet_known_hosts)
        transport = SSHTransport(options)
        transport.preload(hosts)
        return transport

    @contextlib.asynccontextmanager
    async def open(
        self,
        on_key_recorded: Callable[[str], None] | None,
        prepared: SSHTransport | None = None,
    ) -> AsyncIterator[Mapping[str, Transport]]:
        transport = prepared or self.prepared(())
        transport.options = replace(transport.options, on_key_recorded=on_key_recorded)
        try:
            yield {"ssh": transport}
        finally:
            await transport.close()


@dataclass(frozen=True)
class WorkerJob:
    """What one worker does: its hosts, its share of the bounds, its two pipes (fds in the seed)."""

    index: int
    hosts: tuple[Host, ...]
    settings: RunSettings
    stream_fd: int  # the worker writes its frames here (the seed's end, as the seed has it)
    stop_fd: int  # closed by the parent: stop (interrupt every unfinished host)


@dataclass(frozen=True)
class SeedJob:
    """What the seed is given on its stdin: every worker's job and what they share."""

    bundle: Bundle
    transports: SshTransports
    workers: tuple[WorkerJob, ...]
    log_level: int = logging.WARNING
    unused_fds: tuple[int, ...] = ()  # pipes of workers the seed was started for but not given


@dataclass(frozen=True)
class WorkerPipes:
    """One worker's two pipes: its stream (the worker writes, the parent reads) and its stop pipe
    (the parent closes its end: stop). The seed is given its ends when it starts."""

    stream_read: int
    stream_write: int  # the seed's end, the worker's
    stop_read: int  # the seed's end, the worker's
    stop_write: int

    @classmethod
    def open(cls) -> WorkerPipes:
        stream_read, stream_write = os.pipe()
        stop_read, stop_write = os.pipe()
        return cls(stream_read, stream_write, stop_read, stop_write)

    @property
    def seed_ends(self) -> tuple[int, int]:
        return self.stream_write, self.stop_read

    def close_parent_ends(self) -> None:
        for fd in (self.stream_read, self.stop_write):
            with contextlib.suppress(OSError):
                os.close(fd)


class SeedProcess:
    """The seed (execution/seed.py) started and waiting for its SeedJob on stdin, with the pipes
    of up to `most` workers. Started before the job is known (ProbePlan.make, for a big inventory:
    limits.early_seed_workers), its imports overlap the parent's reading of the inventory
    instead of following it."""

    def __init__(self, most: int) -> None:
        self.started_at = time.monotonic()
        self.pipes = [WorkerPipes.open() for _ in range(most)]
        self.given = False
        seed_ends = [fd for pipes in self.pipes for fd in pipes.seed_ends]
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SEED_CODE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=seed_ends,
                env=seed_environment(),
            )
        except OSError:
            for pipes in self.pipes:
                pipes.close_parent_ends()
            raise
        finally:
            for fd in seed_ends:
                os.close(fd)

    def job_for(self, job: SeedJob) -> SeedJob:
        """`job` with each worker's pipes (the first len(job.workers) sets), the rest unused."""
        workers = [
            replace(worker, stream_fd=pipes.stream_write, stop_fd=pipes.stop_read)
            for worker, pipes in zip(job.workers, self.pipes)
        ]
        unused = [fd for pipes in self.pipes[len(workers) :] for fd in pipes.seed_ends]
        return replace(job, workers=tuple(workers), unused_fds=tuple(unused))

    async def give(self, job: SeedJob) -> None:
        """Its job on stdin; the parent's ends of the pipes no worker uses closed. A seed that
        died first is not an error here: its workers' streams end, and their hosts say so."""
        if len(job.workers) > len(self.pipes):
            raise ValueError(f"{len(job.workers)} workers for a seed of {len(self.pipes)}")
        self.given = True
        for pipes in self.pipes[len(job.workers) :]:
            pipes.close_parent_ends()
        body = pickle.dumps(self.job_for(job), protocol=pickle.HIGHEST_PROTOCOL)
        await asyncio.get_running_loop().run_in_executor(None, self._write_job, body)

    def _write_job(self, body: bytes) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.write(body)
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()

    async def reports(self) -> AsyncIterator[bytes]:
        """The seed's stdout, a line at a time, until it ends."""
        assert self.process.stdout is not None
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self.process.stdout
        )
        async for line in reader:
            yield line

    async def ended(self, grace_s: float, pids: Callable[[], Sequence[int]]) -> None:
        """Wait for the seed (it ends once its workers have); past `grace_s`, or cancelled,
        kill it and the workers `pids()` names."""
        waiting = asyncio.get_running_loop().run_in_executor(None, self.process.wait)
        try:
            await asyncio.wait_for(asyncio.shield(waiting), grace_s)
        except asyncio.TimeoutError:
            self.kill(pids())
            await waiting
        except asyncio.CancelledError:
            self.kill(pids())
            raise

    def kill(self, pids: Sequence[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    def discard(self) -> None:
        """Not needed after all (too few hosts for workers, or the command failed before its
        hosts ran): the seed, which has no worker yet, killed and reaped; its pipes closed."""
        if self.given:
            return
        self.given = True
        for pipes in self.pipes:
            pipes.close_parent_ends()
        self.kill(())
        self.process.wait()
        log.debug("the workers' seed was not needed: ended (pid %d)", self.process.pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@dataclass
class Worker:
    """The parent's side of one worker: its hosts, what it has reported, its pipes."""

    job: WorkerJob
    stream: FrameReader | None = None
    stop_fd: int | None = None  # the parent's end of the stop pipe
    pid: int | None = None
    done: bool = False  # it said it ended every host
    ended_how: str | None = None  # the seed's word on how it ended
    reported: asyncio.Event = field(default_factory=asyncio.Event)
    outcomes: dict[str, HostOutcome] = field(default_factory=dict)

    def stop(self) -> None:
        if self.stop_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.stop_fd)
            self.stop_fd = None


class WorkerFanOut:
    """The fan-out of `hosts` over `count` worker processes (see the module docstring)."""

    def __init__(
        self,
        bundle: Bundle,
        transports: SshTransports,
        settings: RunSettings,
        count: int,
        events: Events | None = None,
        interrupt: asyncio.Event | None = None,
        on_key_recorded: Callable[[str], None] | None = None,
        seed: SeedProcess | None = None,
    ) -> None:
        self.bundle, self.transports, self.settings = bundle, transports, settings
        self.early_seed = seed  # started before the hosts were known (ProbePlan.make)
        self.count = count
        self.events = events or Events()
        self.interrupt = interrupt or asyncio.Event()
        self.on_key_recorded = on_key_recorded
        self.by_name: dict[str, Host] = {}
        self.workers: list[Worker] = []
        self.clock: HostClock | None = None  # FLEET_WORKER_TIMELINE's stamps (the bench's)

    async def run(self, hosts: Sequence[Host]) -> dict[str, HostOutcome]:
        self.clock = HostClock.from_env("relay")
        self.by_name = {h.name: h for h in hosts}
        self.workers = self._plan(hosts)
        async with self._seed() as seed:
            stopping = asyncio.ensure_future(self._stop_on_interrupt(seed))
            try:
                await asyncio.gather(*(self._follow(worker) for worker in self.workers))
            finally:
                stopping.cancel()
        outcomes = {name: o for w in self.workers for name, o in w.outcomes.items()}
        if self.clock is not None:
            self.clock.write(hosts=len(hosts), workers={w.job.index: w.pid for w in self.workers})
        return {h.name: outcomes[h.name] for h in hosts}

    def _mark(self, what: str) -> None:
        if self.clock is not None:
            self.clock.mark(what)

    def _plan(self, hosts: Sequence[Host]) -> list[Worker]:
        files = raise_open_file_limit()
        settings = share_settings(self.settings, self.count, files)
        shares = [share for share in deal(hosts, self.count) if share]
        limits = [
            plan_limits(s, settings.concurrency, settings.handshakes, settings.open_files)
            for s in shares
        ]
        joined = joined_limits(limits, len(hosts), files)
        log.debug("%d hosts: %s", len(hosts), joined.describe())
        self.events.run_planned(joined)
        return [Worker(WorkerJob(i, tuple(s), settings, -1, -1)) for i, s in enumerate(shares)]

    @contextlib.asynccontextmanager
    async def _seed(self) -> AsyncIterator[SeedProcess]:
        """The seed given every worker's job (the one started early, if it has room for them);
        on the way out, every worker stopped and the seed gone (killed, workers and all, if it
        outlives STOP_GRACE_S)."""
        seed = self.early_seed
        if seed is None or len(seed.pipes) < len(self.workers):
            if seed is not None:
                seed.discard()
            seed = SeedProcess(len(self.workers))
        self.early_seed = None
        if self.clock is not None:
            self.clock.mark("seed_starting", seed.started_at)
        try:
            for worker, pipes in zip(self.workers, seed.pipes):
                await self._connect(worker, pipes)
            level = logging.getLogger("fleet").getEffectiveLevel()  # --debug reaches the workers
            await seed.give(SeedJob(self.bundle, self.transports, self._jobs(), level))
        except BaseException:
            seed.discard()
            raise
        self._mark("seed_given_its_job")
        reports = asyncio.ensure_future(self._read_reports(seed))
        try:
            yield seed
        finally:
            for worker in self.workers:
                worker.stop()
            await seed.ended(STOP_GRACE_S, self._pids)
            await asyncio.wait([reports], timeout=DEATH_REPORT_WAIT_S)
            reports.cancel()

    def _jobs(self) -> tuple[WorkerJob, ...]:
        return tuple(worker.job for worker in self.workers)

    async def _connect(self, worker: Worker, pipes: WorkerPipes) -> None:
        """The parent's ends of a worker's pipes: its stream read as frames, its stop pipe."""
        loop = asyncio.get_running_loop()
        worker.stop_fd = pipes.stop_write
        deliver = lambda message: self._deliver(worker, message)  # noqa: E731
        pipe = os.fdopen(pipes.stream_read, "rb", buffering=0)
        _, worker.stream = await loop.connect_read_pipe(lambda: FrameReader(deliver), pipe)

    def _pids(self) -> list[int]:
        """The workers still running (one the seed has reaped may have a new owner by now)."""
        return [w.pid for w in self.workers if w.pid is not None and w.ended_how is None]

    async def _read_reports(self, seed: SeedProcess) -> None:
        """The seed's word, a JSON line each: a worker started (its pid), a worker ended (how)."""
        async for line in seed.reports():
            report = json.loads(line)
            worker = self.workers[int(report["worker"])]
            worker.pid = int(report["pid"])
            self._mark(f"worker_{report['worker']}_{'ended' if 'ended' in report else 'forked'}")
            if "ended" in report:
                worker.ended_how = str(report["ended"])
                worker.reported.set()

    async def _stop_on_interrupt(self, seed: SeedProcess) -> None:
        await self.interrupt.wait()
        for worker in self.workers:
            worker.stop()  # each interrupts its unfinished hosts and ends their sessions
        await asyncio.sleep(STOP_GRACE_S)
        log.warning("workers still running %g s after Ctrl-C: killed", STOP_GRACE_S)
        seed.kill(self._pids())

    async def _follow(self, worker: Worker) -> None:
        """Until the worker's stream ends; then a host error for each host it did not finish."""
        assert worker.stream is not None
        await worker.stream.ended
        if not worker.done:  # it died: the seed says how
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(worker.reported.wait(), DEATH_REPORT_WAIT_S)
        for host in worker.job.hosts:
            if host.name not in worker.outcomes:
                self._finished(worker, self._lost(worker, host))

    def _lost(self, worker: Worker, host: Host) -> HostOutcome:
        who = f"worker {worker.job.index}" + (f" (pid {worker.pid})" if worker.pid else "")
        how = worker.ended_how or "ended without a word"
        if self.interrupt.is_set():
            return HostOutcome(host.name, "interrupted", host.address, f"{who} {how}")
        return HostOutcome(
            host.name,
            "unreachable",
            host.address,
            error=f"{who}, the controller process that ran this host, {how} before it finished",
            hint="the host was not judged; run it again (--workers 1 runs every host in one "
            "process)",
        )

    def _deliver(self, worker: Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "finished":
            self._finished(worker, message[1])
        elif kind == "done":
            worker.done = True
        elif kind == "key":
            if self.on_key_recorded is not None:
                self.on_key_recorded(message[1])
        else:
            self._relay(kind, self.by_name[message[1]], message[2:])

    def _relay(self, kind: str, host: Host, rest: tuple[Any, ...]) -> None:
        if kind == "connecting":
            self.events.host_connecting(host)
        elif kind == "running":
            self.events.host_running(host)
        elif kind == "probes":
            self.events.probes_running(host, rest[0])
        elif kind == "probe":
            self.events.probe_finished(host, rest[0], rest[1])

    def _finished(self, worker: Worker, outcome: HostOutcome) -> None:
        if outcome.name in worker.outcomes:
            return  # one outcome per host
        worker.outcomes[outcome.name] = outcome
        if self.clock is not None:
            self.clock.host_done()
        self.events.host_finished(outcome)


def joined_limits(limits: Sequence[FanLimits], hosts: int, open_files: int) -> FanLimits:
    """The workers' bounds together, as the progress display says them."""
    return FanLimits(
        handshakes=sum(limit.handshakes for limit in limits),
        sessions=sum(limit.sessions for limit in limits),
        hosts=hosts,
        open_files=open_files,
        capped_by_open_files=any(limit.capped_by_open_files for limit in limits),
        workers=len(limits),
    )


def seed_environment() -> dict[str, str]:
    """The seed's environment: this one, with this very fleet first on its path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
    return env
