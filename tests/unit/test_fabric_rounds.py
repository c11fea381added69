"""fleet fabric's rounds over an in-memory transport. Each host takes its turn as in the fan-out
(fleet/execution/turn.py): its own deadline, every error caught, worded and logged alike."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import pytest

from fleet.execution.bundle import build_bundle
from fleet.execution.fanout import FanOut, RunSettings
from fleet.fabric import plan
from fleet.fabric import run as fabric_run
from fleet.fabric.run import FabricOutcome, FabricRounds, FabricSettings
from fleet.models import Host
from fleet.transport.base import ExecResult, OutputSink
from tests.unit.fabric_helpers import RankTransport, hosts

SETTINGS = FabricSettings(
    backend="gloo", pairs=plan.PairSpec("one"), full_group=False, sizes=(8,), round_timeout_s=0.3
)


def run_rounds(
    transport: RankTransport, names: list[str], interrupt_after_s: float | None = None
) -> FabricOutcome:
    async def run() -> FabricOutcome:
        interrupt = asyncio.Event()
        if interrupt_after_s is not None:
            asyncio.get_running_loop().call_later(interrupt_after_s, interrupt.set)
        rounds = FabricRounds({"memory": transport}, SETTINGS, interrupt=interrupt)  # type: ignore[dict-item]
        return await rounds.run(hosts(*names))

    return asyncio.run(run())


@pytest.fixture(autouse=True)
def short_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric_run, "CONTROLLER_SLACK_S", 0.1)
    monkeypatch.setattr(fabric_run, "DISCOVER_TIMEOUT_S", 0.2)


def test_a_pair_measures_when_both_hosts_answer() -> None:
    outcome = run_rounds(RankTransport({"a": "ok", "b": "ok"}), ["a", "b"])
    [pair] = outcome.section["pairs"]
    assert pair["status"] == "ok", pair
    assert {h.status for h in outcome.outcomes.values()} == {"ok"}


def test_a_hanging_host_ends_the_round_by_its_own_deadline() -> None:
    transport = RankTransport({"a": "ok", "b": "hang"})
    started = time.monotonic()
    outcome = run_rounds(transport, ["a", "b"])
    [pair] = outcome.section["pairs"]
    assert pair["status"] == "timeout", pair
    assert transport.cancelled == ["b"]  # its turn's deadline stopped it: round + slack
    assert time.monotonic() - started < 5


def test_a_host_silent_at_discovery_is_unreached_after_its_deadline() -> None:
    outcome = run_rounds(RankTransport({"a": "ok", "b": "ok"}, silent=frozenset("b")), ["a", "b"])
    assert outcome.outcomes["b"].status == "unreachable"
    assert outcome.outcomes["b"].error == "b did not answer within 0.3 s"  # connect + discovery
    assert outcome.section["pairs"][0]["status"] == "skipped"


def test_an_unmapped_error_is_worded_and_logged_as_the_fan_out_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fleet")
    outcome = run_rounds(RankTransport({"a": "ok", "b": "crash"}), ["a", "b"])
    [pair] = outcome.section["pairs"]
    assert pair["status"] == "failed"
    assert pair["error"].endswith("b: lost b (local): RuntimeError('socket fell over')")
    fabric_log = [r for r in caplog.records if r.exc_info and r.getMessage().startswith("b: ")]

    class Crashes(RankTransport):
        async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
            raise RuntimeError("socket fell over")

    async def fan_out() -> str | None:
        transport = {"memory": Crashes({})}
        outcomes = await FanOut(build_bundle(["system"]), transport, RunSettings()).run(hosts("b"))  # type: ignore[arg-type]
        return outcomes["b"].error

    caplog.clear()
    assert asyncio.run(fan_out()) == "lost b (local): RuntimeError('socket fell over')"
    fan_out_log = [r for r in caplog.records if r.exc_info and r.getMessage().startswith("b: ")]
    assert [(r.name, r.getMessage()) for r in fabric_log] == [
        (r.name, r.getMessage()) for r in fan_out_log
    ]
    assert fabric_log
    assert fabric_log[0].name.startswith("fleet.")  # shown by --debug


def test_ctrl_c_mid_round_stops_every_host_of_the_group() -> None:
    transport = RankTransport({"a": "hang", "b": "hang"})
    slow = dataclasses.replace(SETTINGS, round_timeout_s=30.0)
    started = time.monotonic()

    async def run() -> FabricOutcome:
        interrupt = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, interrupt.set)
        rounds = FabricRounds({"memory": transport}, slow, interrupt=interrupt)  # type: ignore[dict-item]
        outcome = await rounds.run(hosts("a", "b"))
        assert sorted(transport.cancelled) == ["a", "b"]  # before run() returns, not at loop end
        return outcome

    outcome = asyncio.run(run())
    assert outcome.interrupted
    assert outcome.section["pairs"][0]["status"] == "interrupted"
    assert time.monotonic() - started < 5
