"""Live progress, in-process: a rich Console writing to a StringIO, on a terminal and off one."""

from __future__ import annotations

import asyncio
import io
import sys
import time

from rich.console import Console

from fleet.execution.fanout import FanOut, RunSettings
from fleet.execution.limits import plan_limits
from fleet.models import Host, HostOutcome
from fleet.render.terminal.progress import ProgressEvents
from fleet.transport import LocalTransport
from tests.runner.conftest import make_bundle


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=200, color_system=None), out


def host(name: str) -> Host:
    return Host(name=name, address=name)


def outcome(name: str, status: str = "ok", error: str | None = None) -> HostOutcome:
    return HostOutcome(name=name, status=status, address=name, error=error, elapsed_s=1.25)


def test_off_a_terminal_each_host_of_a_small_fleet_gets_a_line_as_it_ends() -> None:
    con, out = console(terminal=False)
    with ProgressEvents(con, 2, ["system", "torch"], line_every_s=60) as events:
        for name in ("a", "b"):
            events.host_connecting(host(name))
        events.host_running(host("a"))
        events.probes_running(host("a"), ["torch"])
        assert events.status_line().endswith("0/2 done · 1 connecting · 1 running · a on torch")
        events.host_finished(outcome("a"))
        events.host_finished(outcome("b", "unreachable", "cannot connect to b"))
        assert "2/2 done · 1 unreachable" in events.status_line()
    assert out.getvalue().splitlines() == [
        "  a: ok after 1.2s",
        "  b: unreachable after 1.2s: cannot connect to b",
    ]


def test_off_a_terminal_a_big_fleet_gets_failures_and_a_status_line_every_few_seconds() -> None:
    con, out = console(terminal=False)
    hosts = [host(f"h{i:03d}") for i in range(100)]
    with ProgressEvents(con, len(hosts), line_every_s=0.05) as events:
        events.run_planned(plan_limits(hosts, handshakes=32, open_files=100_000))
        for one in hosts:
            events.host_connecting(one)
        for one in hosts[:60]:
            events.host_running(one)
        for one in hosts[:50]:
            events.host_finished(outcome(one.name))
        events.host_finished(outcome("h099", "timeout", "no result within 120 s"))
        time.sleep(0.3)  # the status line comes from its own thread, whatever the loop does
    lines = out.getvalue().splitlines()
    assert lines[0] == "probing 100 hosts: handshakes ≤ 32 at once, sessions ≤ 100"
    assert "  h099: timeout after 1.2s: no result within 120 s" in lines
    assert not any(line.startswith("  h000") for line in lines), "ok hosts: no line each at scale"
    assert any("51/100 done · 39 connecting · 10 running · 1 timeout" in line for line in lines), (
        lines
    )


def test_on_a_terminal_the_bar_shows_the_split_and_small_fleets_the_probe_each_host_is_on() -> None:
    con, out = console(terminal=True)
    events = ProgressEvents(con, 2, ["system", "torch", "nccl"])
    assert events.progress is not None
    events.host_connecting(host("gpu-a"))
    events.host_connecting(host("gpu-b"))
    events.host_running(host("gpu-a"))
    events.probe_finished(host("gpu-a"), "system", "ok")
    events.probes_running(host("gpu-a"), ["nccl", "torch"])
    con.print(events.progress)  # what the live display draws, once
    drawn = out.getvalue()
    assert "1 connecting · 1 running" in drawn
    rows = {line.split()[0]: line for line in drawn.splitlines() if line.startswith("  gpu")}
    assert "1/3" in rows["gpu-a"]
    assert "on nccl, torch" in rows["gpu-a"]
    assert "connecting" in rows["gpu-b"]


def test_on_a_terminal_a_big_fleet_has_one_bar_and_no_host_rows() -> None:
    con, out = console(terminal=True)
    events = ProgressEvents(con, 100)
    assert events.progress is not None
    for i in range(100):
        events.host_connecting(host(f"h{i}"))
    events.host_running(host("h1"))
    events.host_finished(outcome("h2", "auth_failed"))
    con.print(events.progress)
    drawn = out.getvalue()
    assert "1/100" in drawn
    assert "98 connecting · 1 running · 1 auth_failed" in drawn
    assert "h1" not in drawn


SLOW = """
import time
def collect(options):
    time.sleep(2.5)
    return {"ok": True, "data": {}}
"""
QUICK = """
def collect(options):
    return {"ok": True, "data": {}}
"""


def test_a_real_run_reports_the_probe_a_host_is_on_from_its_heartbeat() -> None:
    con, out = console(terminal=False)
    bundle = make_bundle({"slow": SLOW, "quick": QUICK})
    local = Host(name="here", address="localhost", transport="local", python=sys.executable)
    seen: list[str] = []

    async def main() -> None:
        with ProgressEvents(con, 1, list(bundle.probes), line_every_s=60) as events:
            runner = FanOut(bundle, {"local": LocalTransport()}, RunSettings(timeout_s=30), events)
            task = asyncio.ensure_future(runner.run([local]))
            while not task.done():
                seen.append(events.status_line())
                await asyncio.sleep(0.1)
            assert task.result()["here"].status == "ok"

    asyncio.run(main())
    assert any(line.endswith("1 running · here on slow") for line in seen), seen
    assert out.getvalue().startswith("  here: ok after ")
