"""Fan-out: runs the bundle on every selected host at once, bounded, and never raises for one host.

Each host ends with exactly one HostOutcome. A slow, dead or hostile host costs only itself: its own
deadline, its own output cap, its own error (its turn, execution/turn.py, as in `fleet fabric`). Ctrl-C turns every unfinished host into `interrupted`
while keeping whatever probes it had already reported.

A host goes queued → connecting → running → done. Connecting (the handshake: controller CPU) is
bounded by `FanLimits.handshakes`; a host's deadline starts there. Hosts connecting or running
(sockets, waiting on remote work) are bounded by `FanLimits.sessions`: all of them by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.execution.bundle import Bundle
from fleet.execution.deadline import Deadline
from fleet.execution.limits import FanLimits, plan_limits
from fleet.execution.protocol import StreamDecoder, Verdict, build_outcome, conclude
from fleet.execution.timeline import HostClock
from fleet.execution.turn import host_error_line, take_turn
from fleet.models import Host, HostOutcome
from fleet.transport.base import DEFAULT_OUTPUT_LIMIT, Transport
from fleet.transport.launch import start_up_alarm

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0  # per host from its handshake, connecting included: CLI and API default
DEFAULT_CONCURRENCY: int | None = None  # no cap of the user's: the bounds of execution/limits.py
REMOTE_PARALLEL = 4  # probes at once on a host (the torch ones share one preloaded fork server)
INTERRUPT_GRACE_S = 1.5
DEADLINE_SLACK_S = 5.0  # the remote alarm fires a little before the controller gives up


@dataclass
class RunSettings:
    concurrency: int | None = DEFAULT_CONCURRENCY  # caps handshakes and sessions
    handshakes: int | None = None  # handshakes in flight; None: from the controller's cores
    timeout_s: float = DEFAULT_TIMEOUT_S  # per host, from the start of its handshake to its end
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    remote_parallel: int = REMOTE_PARALLEL
    cli_probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the open-file budget this fan-out works within; None: the process's own (raised) limit.
    # A worker process gets its share of the controller's (fleet/execution/workers.py)
    open_files: int | None = None


class Events:
    """What the fan-out tells the display. Override what you need; the defaults do nothing."""

    def run_planned(self, limits: FanLimits) -> None:
        """Before any host: the bounds this run works within."""

    def host_connecting(self, host: Host) -> None:
        """Its handshake started (its clock runs from here)."""

    def host_running(self, host: Host) -> None:
        """Its script has started there: its first output came back."""

    def probes_running(self, host: Host, probes: Sequence[str]) -> None:
        """The probes the host is on, from its runner's heartbeat (about once a second)."""

    def probe_finished(self, host: Host, probe: str, status: str) -> None: ...

    def host_finished(self, outcome: HostOutcome) -> None: ...


def options_for_host(
    host: Host, bundle: Bundle, cli: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per-probe options for one host: the inventory's probe_args, overridden by the CLI."""
    return {
        name: {**dict(host.probe_args.get(name) or {}), **dict(cli.get(name) or {})}
        for name in bundle.probes
    }


class FanOut:
    def __init__(
        self,
        bundle: Bundle,
        transports: Mapping[str, Transport],
        settings: RunSettings,
        events: Events | None = None,
        interrupt: asyncio.Event | None = None,
    ) -> None:
        self.bundle, self.transports, self.settings = bundle, transports, settings
        self.events = events or Events()
        self.interrupt = interrupt or asyncio.Event()
        self._decoders: dict[str, StreamDecoder] = {}
        self._started: dict[str, float] = {}
        self._scripts: dict[str, bytes] = {}
        self._handshakes: asyncio.Semaphore | None = None  # made by run(), inside the loop
        self._clock: HostClock | None = None  # FLEET_WORKER_TIMELINE's stamps (the bench's)

    async def run(self, hosts: Sequence[Host]) -> dict[str, HostOutcome]:
        self._clock = HostClock.from_env("fanout")
        limits = self._plan(hosts)
        sessions = asyncio.Semaphore(limits.sessions)
        tasks = {h.name: asyncio.ensure_future(self._bounded(h, sessions)) for h in hosts}
        interrupted = asyncio.ensure_future(self.interrupt.wait())
        # one future for all hosts: waking per finished host over all N tasks was O(N²)
        everything: asyncio.Future[Any] = asyncio.gather(*tasks.values(), return_exceptions=True)
        try:
            await asyncio.wait([everything, interrupted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted.cancel()
        if self.interrupt.is_set():
            await self._cancel(tasks)
        outcomes = {h.name: self._outcome_of(h, tasks[h.name]) for h in hosts}
        if self._clock is not None:
            self._clock.write(hosts=len(hosts), handshakes=limits.handshakes)
        return outcomes

    def _plan(self, hosts: Sequence[Host]) -> FanLimits:
        settings = self.settings
        limits = plan_limits(hosts, settings.concurrency, settings.handshakes, settings.open_files)
        if limits.capped_by_open_files:
            log.warning("the open-file limit caps this run: %s", limits.describe())
        self._handshakes = asyncio.Semaphore(limits.handshakes)
        self.events.run_planned(limits)
        return limits

    async def _cancel(self, tasks: Mapping[str, asyncio.Task[HostOutcome]]) -> None:
        pending = [t for t in tasks.values() if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=INTERRUPT_GRACE_S)

    def _outcome_of(self, host: Host, task: asyncio.Task[HostOutcome]) -> HostOutcome:
        if task.done() and not task.cancelled() and task.exception() is None:
            return task.result()
        decoder = self._decoders.get(host.name) or StreamDecoder()
        verdict = conclude(
            decoder, None, list(self.bundle.probes), python=host.python, interrupted=True
        )
        outcome = build_outcome(host.name, host.address, decoder, verdict, self._elapsed(host))
        self.events.host_finished(outcome)
        return outcome

    async def _bounded(self, host: Host, sessions: asyncio.Semaphore) -> HostOutcome:
        async with sessions:
            started = self._started[host.name] = time.monotonic()  # until its handshake starts
            outcome = await self.probe_host(host)
        if self._clock is not None:
            self._clock.add("host", time.monotonic() - started)
            self._clock.host_done()
        self.events.host_finished(outcome)
        return outcome

    async def probe_host(self, host: Host) -> HostOutcome:
        """One host's turn (execution/turn.py: its deadline, its errors), read into its outcome.
        Ctrl-C goes through: run() concludes the host as interrupted."""
        decoder = StreamDecoder(
            limit_bytes=self.settings.output_limit, expected=frozenset(self.bundle.probes)
        )
        self._decoders[host.name] = decoder
        script = self._script_for(host)
        turn = await take_turn(
            self.transports[host.transport],
            host,
            script,
            self._sink(host, decoder),
            self.settings.timeout_s,
            slot=lambda deadline: self._handshake_slot(host, deadline),
            on_running=lambda: self.events.host_running(host),
        )
        if turn.error is not None:
            verdict = Verdict(
                turn.error.status, host_error_line(turn.error), turn.error.hint or None
            )
        else:
            verdict = conclude(
                decoder,
                turn.result,
                list(self.bundle.probes),
                python=host.python,
                timed_out=turn.timed_out,
                timeout_s=self.settings.timeout_s,
                start_up_s=start_up_alarm(script),
            )
            if turn.result is not None and turn.result.note and not verdict.hint:
                verdict = dataclasses.replace(verdict, hint=turn.result.note)
        return build_outcome(host.name, host.address, decoder, verdict, self._elapsed(host))

    @contextlib.asynccontextmanager
    async def _handshake_slot(self, host: Host, deadline: Deadline) -> AsyncIterator[None]:
        assert self._handshakes is not None, "run() plans the bounds first"
        async with self._handshakes:
            deadline.start()
            queued_since = self._started.get(host.name)
            started = self._started[host.name] = deadline.started_at or time.monotonic()
            self.events.host_connecting(host)
            yield
            if self._clock is not None:
                self._clock.add("queued", started - (queued_since or started))
                self._clock.add("handshake", time.monotonic() - started)

    def _sink(self, host: Host, decoder: StreamDecoder) -> Callable[[bytes], bool]:
        def sink(chunk: bytes) -> bool:
            for message in decoder.feed(chunk):
                self._tell(host, message)
                _log_traceback(host, decoder, message)
            return not decoder.truncated

        return sink

    def _tell(self, host: Host, message: Mapping[str, Any]) -> None:
        kind = message.get("type")
        if kind == "probe":
            self.events.probe_finished(host, str(message.get("name")), str(message.get("status")))
        elif kind == "tick" and isinstance(message.get("running"), list):
            self.events.probes_running(host, [str(name) for name in message["running"]])

    def _script_for(self, host: Host) -> bytes:
        options = options_for_host(host, self.bundle, self.settings.cli_probe_args)
        remote_deadline = max(1.0, self.settings.timeout_s - DEADLINE_SLACK_S)
        key = repr(sorted(options.items()))
        if key not in self._scripts:  # most hosts share options: build each script once
            self._scripts[key] = self.bundle.script(
                options, remote_deadline, self.settings.remote_parallel
            )
        return self._scripts[key]

    def _elapsed(self, host: Host) -> float:
        started = self._started.get(host.name)
        return time.monotonic() - started if started else 0.0


def _log_traceback(host: Host, decoder: StreamDecoder, message: Mapping[str, Any]) -> None:
    """--debug: the traceback tail of a probe that raised, as it arrives (masked)."""
    result = (
        decoder.probes.get(str(message.get("name"))) if message.get("type") == "probe" else None
    )
    if result is not None and result.traceback:
        log.debug(
            "%s: probe %s raised:\n%s", host.name, message.get("name"), result.traceback.rstrip()
        )
