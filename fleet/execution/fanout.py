"""Fan-out: runs the bundle on every selected host at once, bounded, and never raises for one host.

Each host ends with exactly one HostOutcome. A slow, dead or hostile host costs only itself: its own
deadline, its own output cap, its own error. Ctrl-C turns every unfinished host into `interrupted`
while keeping whatever probes it had already reported.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.errors import HostError, UnreachableError
from fleet.execution.bundle import Bundle
from fleet.execution.protocol import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    StreamDecoder,
    Verdict,
    build_outcome,
    conclude,
)
from fleet.models import Host, HostOutcome
from fleet.transport.base import Transport

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0  # per host, connecting included: the one default (CLI and API use it)
DEFAULT_CONCURRENCY = 64
REMOTE_PARALLEL = 4  # probes at once on a host (the torch ones share one preloaded fork server)
INTERRUPT_GRACE_S = 1.5
DEADLINE_SLACK_S = 5.0  # the remote alarm fires a little before the controller gives up


@dataclass
class RunSettings:
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    remote_parallel: int = REMOTE_PARALLEL
    cli_probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class Events:
    """What the runner tells the display. Override what you need; the defaults do nothing."""

    def host_started(self, host: Host) -> None: ...

    def probe_finished(self, host: Host, probe: str, status: str) -> None: ...

    def host_finished(self, outcome: HostOutcome) -> None: ...


def probe_options(
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

    async def run(self, hosts: Sequence[Host]) -> dict[str, HostOutcome]:
        limit = asyncio.Semaphore(self.settings.concurrency)
        tasks = {h.name: asyncio.ensure_future(self._bounded(h, limit)) for h in hosts}
        interrupted = asyncio.ensure_future(self.interrupt.wait())
        # one future for all hosts: waking per finished host over all N tasks was O(N²)
        everything: asyncio.Future[Any] = asyncio.gather(*tasks.values(), return_exceptions=True)
        try:
            await asyncio.wait([everything, interrupted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted.cancel()
        if self.interrupt.is_set():
            await self._cancel(tasks)
        return {h.name: self._outcome_of(h, tasks[h.name]) for h in hosts}

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

    async def _bounded(self, host: Host, limit: asyncio.Semaphore) -> HostOutcome:
        async with limit:
            self._started[host.name] = time.monotonic()
            self.events.host_started(host)
            outcome = await self.probe_host(host)
        self.events.host_finished(outcome)
        return outcome

    async def probe_host(self, host: Host) -> HostOutcome:
        decoder = StreamDecoder(
            limit_bytes=self.settings.output_limit, expected=frozenset(self.bundle.probes)
        )
        self._decoders[host.name] = decoder
        expected = list(self.bundle.probes)
        result: ExecResult | None = None
        timed_out = False
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                result = await self._transport(host).execute(
                    host, self._script_for(host), self._sink(host, decoder)
                )
        except TimeoutError:
            timed_out = True
        except HostError as exc:
            return self._failed(host, decoder, exc)
        except Exception as exc:  # noqa: BLE001 (an error no transport mapped costs only this host)
            lost = UnreachableError(f"lost {host.name} ({host.target()})", context=repr(exc))
            lost.__cause__ = exc
            return self._failed(host, decoder, lost)
        verdict = conclude(
            decoder,
            result,
            expected,
            python=host.python,
            timed_out=timed_out,
            timeout_s=self.settings.timeout_s,
        )
        return build_outcome(host.name, host.address, decoder, verdict, self._elapsed(host))

    def _failed(self, host: Host, decoder: StreamDecoder, exc: HostError) -> HostOutcome:
        log.debug("%s: %s", host.name, exc.message, exc_info=exc)  # --debug shows the cause chain
        error = exc.message + (f": {exc.context}" if exc.context else "")
        verdict = Verdict(exc.status, error, exc.hint or None)
        return build_outcome(host.name, host.address, decoder, verdict, self._elapsed(host))

    def _sink(self, host: Host, decoder: StreamDecoder) -> Callable[[bytes], bool]:
        def sink(chunk: bytes) -> bool:
            for message in decoder.feed(chunk):
                if message.get("type") == "probe":
                    self.events.probe_finished(
                        host, str(message.get("name")), str(message.get("status"))
                    )
            return not decoder.truncated

        return sink

    def _script_for(self, host: Host) -> bytes:
        options = probe_options(host, self.bundle, self.settings.cli_probe_args)
        remote_deadline = max(1.0, self.settings.timeout_s - DEADLINE_SLACK_S)
        key = repr(sorted(options.items()))
        if key not in self._scripts:  # most hosts share options: build each script once
            self._scripts[key] = self.bundle.script(
                options, remote_deadline, self.settings.remote_parallel
            )
        return self._scripts[key]

    def _transport(self, host: Host) -> Transport:
        return self.transports[host.transport]

    def _elapsed(self, host: Host) -> float:
        started = self._started.get(host.name)
        return time.monotonic() - started if started else 0.0
