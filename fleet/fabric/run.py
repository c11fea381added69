"""Runs `fleet fabric`: discovers the hosts, then runs each round's groups through the transports.

Each host ends with exactly one outcome; a host that cannot be reached or cannot join costs only its
own groups (skipped or failed, with the reason). Every host of the discovery and of each group takes
its turn as in the fan-out (fleet/execution/turn.py): its own deadline from its handshake, every
error caught and worded as there (`lost NAME (TARGET)` for one no transport mapped), logged under
`--debug`. A group ends when all its hosts have, or ECHO_GRACE_S after one went wrong (an error,
a complaint, its deadline): its partners get that long to say what they saw. A round so never
outlives its deadline (the controller's here, the rank program's own deadline and alarm there).
Ctrl-C cancels what runs (the transports stop the remote processes) and marks what was left
`interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import statistics
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.errors import HostError
from fleet.execution.turn import error_text, take_turn
from fleet.fabric import launch, plan
from fleet.fabric.blame import DEFAULT_TOLERANCE, Suspect, blame, median_busbw
from fleet.fabric.isolate import IsolateSettings, Isolation
from fleet.fabric.isolating import isolate_rounds, isolate_suspects, suspect_error
from fleet.fabric.results import GroupResult, HostReport, conclude_group, skipped
from fleet.models import Host, HostOutcome, HostStatus, ProbeResult
from fleet.redact import mask_secrets
from fleet.transport.base import ExecResult, OutputSink, Transport

log = logging.getLogger(__name__)

DISCOVER_TIMEOUT_S = 30.0  # a host's discovery deadline, past its connect_timeout
CONTROLLER_SLACK_S = 5.0  # a host's deadline past the round's: the rank program's fires first
ECHO_GRACE_S = 2.0  # after one host fails, how long its partners get to say what they saw
PORT_ATTEMPTS = 3
FABRIC_SCHEMA = "fleet.fabric/2"

# Builds a transport that launches exactly these hosts together, one script for all (Slurm: one
# srun step over their nodes). Given, discovery and every group get their own, closed after.
LaunchTogether = Callable[[Sequence[Host]], Transport]
TransportFor = Callable[[Host], Transport]  # the transport that reaches this host


@dataclass(frozen=True)
class FabricSettings:
    backend: str = "nccl"
    pairs: plan.PairSpec = field(default_factory=lambda: plan.PairSpec("one"))
    full_group: bool = True
    sizes: tuple[int, ...] = ()
    round_timeout_s: float = 120.0
    join_timeout_s: float = 30.0
    tolerance: float = DEFAULT_TOLERANCE
    floor_gbps: float | None = None  # isolate: the cohort's busbw floor (else this run's median)
    seed: int | None = None
    first_port: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def sizes_or_default(self) -> tuple[int, ...]:
        return self.sizes or plan.DEFAULT_SIZES[self.backend]


class FabricEvents:
    """What the rounds tell the display; the defaults do nothing."""

    def discovered(self, host: str, reason: str | None) -> None: ...

    def round_started(self, index: int, groups: Sequence[plan.Group]) -> None: ...

    def group_finished(self, result: GroupResult) -> None: ...


@dataclass
class FabricOutcome:
    outcomes: dict[str, HostOutcome]
    section: dict[str, Any]  # the run document's `fabric`
    interrupted: bool


@dataclass
class Discovery:
    usable: dict[str, list[int]]  # host → device indices (one rank per entry; [0] for gloo)
    unreached: dict[str, HostError]
    unusable: dict[str, str]  # reached, but cannot run a rank (no torch, no GPU)
    python: dict[str, str]


class FabricRounds:
    """`fleet fabric` over `hosts`: `run` discovers them, runs every round, concludes; each
    group's launch is its GroupLauncher's."""

    def __init__(
        self,
        transports: Mapping[str, Transport],
        settings: FabricSettings,
        events: FabricEvents | None = None,
        interrupt: asyncio.Event | None = None,
        together: LaunchTogether | None = None,
    ) -> None:
        self.settings = settings
        self.events = events or FabricEvents()
        self._interrupt = interrupt  # made in the loop when not given (see `interrupt`)
        self.rng = random.Random(settings.seed)  # the pair rounds' and the ports' draws, in turn
        self.launcher = GroupLauncher(transports, settings, together, self.rng)

    @property
    def interrupt(self) -> asyncio.Event:
        """Set to end the rounds early. Made on first use, inside the running loop: under
        Python 3.9 an Event binds to the loop current when it is made, and there may be none
        when the rounds are built (conclude() runs without one)."""
        if self._interrupt is None:
            self._interrupt = asyncio.Event()
        return self._interrupt

    async def run(self, hosts: Sequence[Host]) -> FabricOutcome:
        by_name = {h.name: h for h in hosts}
        found = await self.discover(hosts)
        if self.settings.pairs.mode == "isolate":
            runs, planner = await isolate_rounds(
                lambda index, groups: self.run_round(index, groups, by_name, found),
                self.interrupt.is_set,
                list(found.usable),
                IsolateSettings(self.settings.tolerance, self.settings.floor_gbps),
            )
            return self.conclude(hosts, found, runs, None, planner)
        pairs: list[GroupResult] = []
        ring: GroupResult | None = None
        rounds, full = self.rounds(list(by_name), found)
        for index, groups in enumerate(rounds):
            results = await self.run_round(index, groups, by_name, found)
            if full and index == len(rounds) - 1:
                ring = results[0]
            else:
                pairs += results
        return self.conclude(hosts, found, pairs, ring)

    # -------------------------------------------------------------------------- discovery

    async def discover(self, hosts: Sequence[Host]) -> Discovery:
        found = Discovery({}, {}, {}, {})
        async with self.launcher.reaching(hosts) as reach:
            answers = await asyncio.gather(*(self._discover_one(h, reach(h)) for h in hosts))
        for host, answer in zip(hosts, answers):
            if isinstance(answer, HostError):
                found.unreached[host.name] = answer
                self.events.discovered(host.name, error_text(answer))
                continue
            found.python[host.name] = str(answer.get("python") or "")
            reason = self._unusable(host, answer)
            if reason:
                found.unusable[host.name] = reason
            else:
                found.usable[host.name] = self._devices(host, answer)
            self.events.discovered(host.name, reason)
        return found

    async def _discover_one(self, host: Host, transport: Transport) -> dict[str, Any] | HostError:
        report = HostReport()
        timeout = host.connect_timeout + DISCOVER_TIMEOUT_S
        script = launch.discover_script(timeout)
        turn = await take_turn(transport, host, script, _sink(report), timeout)
        if turn.error is not None:
            return turn.error
        for message in report.of_type("discovered"):
            return message
        if turn.result is None:
            return HostError(f"{host.name} did not answer within {timeout:g} s")
        return HostError(
            f"{host.name}: {host.python} did not run", context=exec_summary(turn.result)
        )

    def _unusable(self, host: Host, answer: Mapping[str, Any]) -> str | None:
        if not answer.get("torch"):
            return f"torch is not importable by {host.python} on {host.name}"
        if self.settings.backend == "nccl" and not self._devices(host, answer):
            return f"no GPU visible on {host.name}: use --backend gloo for CPU ranks"
        return None

    def _devices(self, host: Host, answer: Mapping[str, Any]) -> list[int]:
        if self.settings.backend != "nccl":
            return [0]
        chosen = (host.probe_args.get("fabric") or {}).get("devices")
        if isinstance(chosen, list) and chosen:
            return [int(d) for d in chosen]
        return list(range(int(answer.get("gpus") or 0)))

    # ----------------------------------------------------------------------------- rounds

    def rounds(self, names: list[str], found: Discovery) -> tuple[list[list[plan.Group]], bool]:
        """Pair rounds over every host (groups with an unusable host are skipped when run), an
        extra round for usable hosts left without a partner, then the full group (True: it is
        the last round)."""
        seed = self.rng.randrange(1 << 30)
        rounds = plan.split_overlaps(plan.pair_rounds(names, self.settings.pairs, seed))
        orphans = [h for h in found.usable if not _has_partner(h, rounds, found)]
        if orphans and len(found.usable) >= 2 and self.settings.pairs.mode in ("one", "random"):
            rounds += plan.split_overlaps([plan.rescue_round(orphans, list(found.usable), seed)])
        full = self.settings.full_group and len(found.usable) >= 2
        if full:
            rounds.append([tuple(found.usable)])
        return rounds, full

    async def run_round(
        self,
        index: int,
        groups: Sequence[plan.Group],
        by_name: Mapping[str, Host],
        found: Discovery,
    ) -> list[GroupResult]:
        runnable = [g for g in groups if all(h in found.usable for h in g)]
        if self.interrupt.is_set():
            runnable = []
        self.events.round_started(index, runnable)
        results = [self._skipped(g, found, index) for g in groups if g not in runnable]
        tasks = [
            asyncio.ensure_future(self.launcher.run_group(index, g, by_name, found))
            for g in runnable
        ]
        if tasks:
            results += await self._finish(tasks, runnable, index)
        for result in results:
            self.events.group_finished(result)
        return results

    async def _finish(
        self, tasks: list[asyncio.Task[GroupResult]], groups: Sequence[plan.Group], index: int
    ) -> list[GroupResult]:
        """Wait for the round's groups, or for Ctrl-C: then cancel them (their hosts are stopped)."""
        interrupted = asyncio.ensure_future(self.interrupt.wait())
        try:
            await asyncio.wait([*tasks, interrupted], return_when=asyncio.FIRST_COMPLETED)
            while not self.interrupt.is_set() and not all(t.done() for t in tasks):
                await asyncio.wait([*tasks, interrupted], return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return [_result_of(t, g, index) for t, g in zip(tasks, groups)]

    def _skipped(self, group: plan.Group, found: Discovery, index: int) -> GroupResult:
        if self.interrupt.is_set():
            return GroupResult(tuple(group), "interrupted", error="interrupted", round=index)
        reasons = [_why_unusable(h, found) for h in group if h not in found.usable]
        return skipped(group, "; ".join(r for r in reasons if r), index)

    # ---------------------------------------------------------------------------- the end

    def conclude(
        self,
        hosts: Sequence[Host],
        found: Discovery,
        pairs: Sequence[GroupResult],
        ring: GroupResult | None,
        planner: Isolation | None = None,
    ) -> FabricOutcome:
        unreached = {h: error_text(e) for h, e in found.unreached.items()}
        if planner is None:
            suspects = blame(pairs, unreached, self.settings.tolerance)
        else:
            suspects = blame([], unreached) + isolate_suspects(planner, self.settings.tolerance)
        section = build_fabric_section(self.settings, pairs, ring, suspects, found)
        if planner is not None:
            section["isolate"] = planner.summary()
        outcomes = {h.name: host_outcome(h, found, pairs, suspects, section) for h in hosts}
        interrupted = self._interrupt is not None and self._interrupt.is_set()
        return FabricOutcome(outcomes, mask_secrets(section), interrupted)


class GroupLauncher:
    """Runs one group's ranks on its hosts (`run_group`): its rendezvous port (another when
    busy), each host's rank script and turn, the group's end (ECHO_GRACE_S after trouble)."""

    def __init__(
        self,
        transports: Mapping[str, Transport],
        settings: FabricSettings,
        together: LaunchTogether | None,
        rng: random.Random,
    ) -> None:
        self.transports, self.settings, self.together = transports, settings, together
        self.rng = rng
        self.ports: set[int] = set()
        self.failed_masters: set[str] = set()
        self.source = launch.rank_source()

    async def run_group(
        self, index: int, group: plan.Group, by_name: Mapping[str, Host], found: Discovery
    ) -> GroupResult:
        """One group's allreduce; a busy rendezvous port means another port, up to PORT_ATTEMPTS."""
        ordered = plan.with_master_first(group, frozenset(self.failed_masters))
        placements = plan.place_ranks(ordered, found.usable, self.settings.backend)
        busy: list[int] = []
        result: GroupResult | None = None
        for attempt in range(PORT_ATTEMPTS):
            port = self._port(attempt)
            reports, timed_out = await self._launch(placements, port, by_name)
            if reports[ordered[0]].of_type("port_busy"):
                busy.append(port)
                why = f"port {port} busy on master {ordered[0]} after {attempt + 1} tries"
                result = GroupResult(
                    ordered, "failed", len(placements), ordered[0], port, error=why, round=index
                )
                continue
            result = conclude_group(
                placements, reports, port=port, round_index=index, timed_out=timed_out
            )
            break
        assert result is not None
        # said in the document: a busy port costs a launch, which an operator may wonder about
        result = dataclasses.replace(result, busy_ports=tuple(p for p in busy if p != result.port))
        if result.error and result.error.startswith("master "):
            self.failed_masters.add(ordered[0])  # the next round picks another master
        return result

    def _port(self, attempt: int) -> int:
        first = self.settings.first_port
        if first is not None and attempt == 0 and first not in self.ports:
            self.ports.add(first)
            return first
        return plan.pick_port(self.rng, self.ports)

    async def _launch(
        self, placements: Sequence[plan.Placement], port: int, by_name: Mapping[str, Host]
    ) -> tuple[dict[str, HostReport], bool]:
        hosts = list(dict.fromkeys(p.host for p in placements))
        reports = {h: HostReport() for h in hosts}
        scripts = self._rank_scripts(
            {h: self._config(h, hosts, placements, port, by_name) for h in hosts}
        )
        async with self.reaching([by_name[h] for h in hosts]) as reach:
            tasks = {
                h: asyncio.ensure_future(
                    self._run_host(by_name[h], reach(by_name[h]), scripts[h], reports[h])
                )
                for h in hosts
            }
            try:
                await self._wait_group(tasks, reports)
            finally:  # also when Ctrl-C cancels the group: its hosts are stopped, not left behind
                for task in tasks.values():
                    task.cancel()
                await asyncio.gather(*tasks.values(), return_exceptions=True)
        return reports, any(_timed_out(task) for task in tasks.values())

    def _rank_scripts(self, configs: Mapping[str, Mapping[str, Any]]) -> dict[str, bytes]:
        """Each host's own script; hosts launched together share one that holds every config."""
        deadline = self.settings.round_timeout_s
        if self.together is not None:
            shared = launch.shared_rank_script(configs, deadline, self.source)
            return dict.fromkeys(configs, shared)
        return {h: launch.rank_script(c, deadline, self.source) for h, c in configs.items()}

    @contextlib.asynccontextmanager
    async def reaching(self, hosts: Sequence[Host]) -> AsyncIterator[TransportFor]:
        """How each of `hosts` is reached: the shared transports, or one launch of exactly these
        hosts (`together`), stopped on the way out whatever happened."""
        if self.together is None:
            yield lambda host: self.transports[host.transport]
            return
        transport = self.together(hosts)
        try:
            yield lambda host: transport
        finally:
            await transport.close()

    async def _wait_group(
        self, tasks: Mapping[str, asyncio.Task[bool]], reports: Mapping[str, HostReport]
    ) -> None:
        """Until every host is done (each within its own deadline), or one went wrong: an error,
        a complaint, its deadline. Its partners then get ECHO_GRACE_S to report what they saw."""
        pending = set(tasks.values())
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            trouble = any(_timed_out(task) for task in done) or any(
                r.complaint() or r.of_type("port_busy") for r in reports.values()
            )
            if trouble and pending:
                await asyncio.wait(pending, timeout=ECHO_GRACE_S)
                return

    async def _run_host(
        self, host: Host, transport: Transport, script: bytes, report: HostReport
    ) -> bool:
        """One host's share of a group, its turn as in the fan-out: its deadline is the round's
        plus CONTROLLER_SLACK_S, from its handshake. True when that deadline passed."""
        timeout = self.settings.round_timeout_s + CONTROLLER_SLACK_S
        turn = await take_turn(transport, host, script, _sink(report), timeout)
        if turn.error is not None:
            report.failure = error_text(turn.error)
        elif turn.result is not None:
            report.failure = exec_failure(turn.result, report)
        return turn.timed_out

    def _config(
        self,
        host: str,
        hosts: Sequence[str],
        placements: Sequence[plan.Placement],
        port: int,
        by_name: Mapping[str, Host],
    ) -> dict[str, Any]:
        sizes = self.settings.sizes_or_default()
        peer = next((h for h in hosts if h != host), host)
        return {
            "master": rendezvous_address(by_name[hosts[0]]),
            "port": port,
            "check_port": host == hosts[0],
            "world_size": len(placements),
            "ranks": [{"rank": p.rank, "device": p.device} for p in placements if p.host == host],
            "backend": self.settings.backend,
            "sizes": list(sizes),
            "iters": {str(s): plan.default_iters(self.settings.backend, s) for s in sizes},
            "warmup": 20 if self.settings.backend == "nccl" else 1,  # as the reference loop
            "deadline_s": self.settings.round_timeout_s,
            "join_timeout_s": self.settings.join_timeout_s,
            "route_to": rendezvous_address(by_name[peer]),
            "env": dict(self.settings.env),
        }


# ------------------------------------------------------------------------------- helpers


def _sink(report: HostReport) -> OutputSink:
    def sink(chunk: bytes) -> bool:
        report.feed(chunk)
        return True

    return sink


def _timed_out(task: asyncio.Task[bool]) -> bool:
    """A host's task that ended with its deadline passed (not cancelled, not failed)."""
    return task.done() and not task.cancelled() and task.exception() is None and task.result()


def _has_partner(host: str, rounds: Sequence[Sequence[plan.Group]], found: Discovery) -> bool:
    return any(host in g and all(h in found.usable for h in g) for groups in rounds for g in groups)


def _why_unusable(host: str, found: Discovery) -> str | None:
    if host in found.unreached:
        return f"{host} not reached: {error_text(found.unreached[host])}"
    return found.unusable.get(host)


def _result_of(task: asyncio.Task[GroupResult], group: plan.Group, index: int) -> GroupResult:
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    exc = task.exception() if task.done() and not task.cancelled() else None
    if exc is not None:  # a bug of ours in one group costs only that group
        log.debug("round %d, group %s: controller error", index, ",".join(group), exc_info=exc)
        error = f"controller error: {exc!r}"
        return GroupResult(tuple(group), "failed", error=error, round=index)
    return GroupResult(tuple(group), "interrupted", error="interrupted (Ctrl-C)", round=index)


def rendezvous_address(host: Host) -> str:
    """Where the others reach this host's rank 0: its inventory address (loopback if local)."""
    return "127.0.0.1" if host.transport == "local" else host.address


def exec_summary(result: ExecResult) -> str:
    if result.exit_signal:
        return f"killed by {result.exit_signal}"
    if result.exit_status is None:
        return "connection lost"
    tail = result.stderr_tail.strip().splitlines()
    return f"exit status {result.exit_status}" + (f": {tail[-1]}" if tail else "")


def exec_failure(result: ExecResult, report: HostReport) -> str | None:
    """How the rank program ended, when that is the news: lost, killed, or silent."""
    if report.of_type("done") and result.exit_status == 0:
        return None
    if report.of_type("port_busy") or report.complaint():
        return None  # it said why itself
    return exec_summary(result) + ("" if report.messages else " (the rank program never started)")


def build_fabric_section(
    settings: FabricSettings,
    pairs: Sequence[GroupResult],
    ring: GroupResult | None,
    suspects: Sequence[Suspect],
    found: Discovery,
) -> dict[str, Any]:
    """The run document's `fabric` section (FABRIC_SCHEMA): settings, pairs, ring, suspects, each
    host's NCCL environment and why hosts were skipped. (The HTML report's fabric section is
    fleet.render's `fabric_section`, which draws this one.)"""
    median = median_busbw(pairs)
    envs: dict[str, dict[str, str]] = {}
    for result in [*pairs, *([ring] if ring else [])]:
        for host, env in result.env.items():
            envs.setdefault(host, dict(env))
    return {
        "schema": FABRIC_SCHEMA,
        "backend": settings.backend,
        "pair_mode": settings.pairs.mode
        + (f":{settings.pairs.rounds}" if settings.pairs.mode == "random" else ""),
        "sizes": list(settings.sizes_or_default()),
        "tolerance": settings.tolerance,
        "median_busbw_gbps": None if median is None else round(median, 4),
        "pairs": [p.to_dict() for p in pairs],
        "ring": ring.to_dict() if ring else None,
        "suspects": [s.to_dict() for s in suspects],
        "env": envs,
        "skipped_hosts": {h: _why_unusable(h, found) for h in [*found.unreached, *found.unusable]},
    }


def host_summary(
    name: str, pairs: Sequence[GroupResult], suspects: Sequence[Suspect]
) -> dict[str, Any]:
    """One host's view of the fabric: what `fleet diff`, drift and `fleet check` read as `fabric`."""
    mine = [p for p in pairs if name in p.hosts]
    busbw = [p.busbw_gbps for p in mine if p.status == "ok" and p.busbw_gbps is not None]
    latency = [p.latency_us for p in mine if p.status == "ok" and p.latency_us is not None]
    blamed = [s for s in suspects if name in s.hosts]
    return {
        "busbw_gbps": round(statistics.median(busbw), 4) if busbw else None,
        "latency_us": round(statistics.median(latency), 2) if latency else None,
        "large_bytes": max((p.sizes[-1].bytes for p in mine if p.sizes), default=None),
        "pairs_ok": sum(p.status == "ok" for p in mine),
        "pairs_bad": sum(p.status in ("failed", "timeout") or p.correct is False for p in mine),
        "all_correct": all(p.correct is not False for p in mine),
        "suspect": blamed[0].kind if blamed else None,
        "partners": {
            other: (p.busbw_gbps if p.status == "ok" else p.status)
            for p in mine
            for other in p.hosts
            if other != name
        },
    }


def host_outcome(
    host: Host,
    found: Discovery,
    pairs: Sequence[GroupResult],
    suspects: Sequence[Suspect],
    section: Mapping[str, Any],
) -> HostOutcome:
    if host.name in found.unreached:
        exc = found.unreached[host.name]
        return HostOutcome(host.name, exc.status, host.address, error_text(exc), exc.hint or None)
    data = host_summary(host.name, pairs, suspects)
    data["backend"] = section["backend"]
    data["env"] = section["env"].get(host.name, {})
    error = found.unusable.get(host.name)
    if section["pair_mode"] == "isolate":  # a host in a bad group may have been cleared since
        error = error or suspect_error(host.name, section["isolate"]["suspects"])
    elif error is None and data["pairs_bad"]:
        error = f"{data['pairs_bad']} pair(s) failed or summed wrongly"
    probe_status = "ok" if error is None else "failed"
    result = ProbeResult(probe_status, probe_status == "ok", data, error, 0.0)
    host_status: HostStatus = "ok" if probe_status == "ok" else "partial"
    return HostOutcome(
        host.name,
        host_status,
        host.address,
        error,
        None,
        0.0,
        found.python.get(host.name),
        {"fabric": result},
    )
