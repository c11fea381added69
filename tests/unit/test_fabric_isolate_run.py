"""`fleet fabric --pairs isolate` through FabricRounds over an in-memory transport whose hosts
report allreduce times (a slow host is 50× slower): the section, its schema, each host's outcome,
the exit bits, the terminal and HTML, and `fleet check`'s fabric rules. And a fleet without torch:
nothing measured never reads as healthy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pytest
from rich.console import Console

from fleet.checks import evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.exits import fabric_exit_code
from fleet.fabric import plan
from fleet.fabric import run as fabric_run
from fleet.fabric.run import FabricOutcome, FabricRounds, FabricSettings
from fleet.models import Run
from fleet.render.terminal.fabric import fabric_view
from fleet.transport.base import ExecResult, OutputSink
from fleet.units.fabric.html import fabric_section
from tests.schema_check import errors
from tests.unit.fabric_helpers import RankTransport, hosts, line, rank_config

NAMES = [f"n{i:02d}" for i in range(16)]


class TimedTransport(RankTransport):
    """Ranks that report a time per call: 50× longer on a slow host; no torch on `no_torch`."""

    def __init__(self, slow: frozenset[str] = frozenset(), no_torch: bool = False) -> None:
        super().__init__(dict.fromkeys(NAMES, "ok"))
        self.slow, self.no_torch, self.groups = slow, no_torch, 0

    async def _discover(self, host, sink: OutputSink) -> ExecResult:  # type: ignore[no-untyped-def]
        sink(line({"type": "discovered", "python": "3.12", "torch": not self.no_torch, "gpus": 0}))
        return ExecResult(0)

    async def _ranks(self, host, script: bytes, sink: OutputSink) -> ExecResult:  # type: ignore[no-untyped-def]
        seconds = 5e-2 if host.name in self.slow else 1e-3
        for rank in rank_config(script)["ranks"]:
            size = {"type": "size", "rank": rank["rank"], "bytes": 1 << 20, "seconds": seconds}
            sink(line({**size, "correct": True}))
            sink(line({"type": "rank_done", "rank": rank["rank"], "env": {}}))
        sink(line({"type": "done"}))
        return ExecResult(0)


@pytest.fixture(autouse=True)
def short_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric_run, "CONTROLLER_SLACK_S", 0.1)
    monkeypatch.setattr(fabric_run, "DISCOVER_TIMEOUT_S", 0.2)


def isolate(transport: TimedTransport, mode: str = "isolate") -> tuple[FabricOutcome, Run]:
    settings = FabricSettings(
        backend="gloo", pairs=plan.parse_pairs(mode), sizes=(1 << 20,), round_timeout_s=5
    )

    async def run() -> FabricOutcome:
        rounds = FabricRounds({"memory": transport}, settings)  # type: ignore[dict-item]
        return await rounds.run(hosts(*NAMES))

    outcome = asyncio.run(run())
    document = json.loads(json.dumps(outcome.section))
    run_ = Run("0", "2026-01-01T00:00:00Z", "", "x", outcome.outcomes, ("fabric",), fabric=document)
    return outcome, run_


def terminal(section: Mapping[str, object]) -> str:
    console = Console(width=200, record=True)
    console.print(fabric_view(section, NAMES))
    return console.export_text()


def test_one_slow_host_is_named_with_evidence_and_fails_the_fabric_rule() -> None:
    outcome, run = isolate(TimedTransport(frozenset({"n06"})))
    section = outcome.section
    assert errors("fabric", json.loads(json.dumps(section))) == []
    assert section["pair_mode"] == "isolate"
    assert [(s["kind"], s["hosts"]) for s in section["suspects"]] == [("host", ["n06"])]
    isolate_part = section["isolate"]
    assert isolate_part["rounds"] <= 10
    assert isolate_part["pairs_all"] == {"rounds": 15, "group_runs": 120}
    assert isolate_part["suspects"][0]["evidence"][0]["purpose"] == "screen"
    assert any(len(p["hosts"]) == 4 for p in section["pairs"])  # groups of more than two ran
    # slow, not broken: as in the pair modes, a suspect in the data that `fleet check` fails
    assert {o.status for o in outcome.outcomes.values()} == {"ok"}
    assert outcome.outcomes["n06"].probes["fabric"].data["suspect"] == "host"
    assert fabric_exit_code(run) == 0
    rules = load_rules(pack_path("inference"), available_probes())
    report = evaluate(rules, run)
    verdicts = {(r.rule.id, v.host): v.status for r in report.results for v in r.verdicts}
    assert verdicts[("fabric-not-suspect", "n06")] == "fail"
    assert verdicts[("fabric-not-suspect", "n05")] == "pass"
    assert verdicts[("fabric-correct", "n06")] == "pass"
    text = terminal(section)
    assert "suspect host n06" in text
    assert "--pairs all: 15 rounds, 120 pairs" in text
    assert "n06" in fabric_section(section)


def test_no_fault_is_one_round_and_reads_healthy() -> None:
    outcome, run = isolate(TimedTransport())
    assert outcome.section["isolate"]["rounds"] == 1
    assert outcome.section["suspects"] == []
    assert fabric_exit_code(run) == 0
    assert "no suspect: every group within tolerance" in terminal(outcome.section)


@pytest.mark.parametrize("mode", ["one", "isolate"])
def test_without_torch_nothing_measured_is_said_once_and_exits_4(mode: str) -> None:
    outcome, run = isolate(TimedTransport(no_torch=True), mode)
    text = terminal(outcome.section)
    assert text.count("torch is not importable") == 1, text
    assert "could not run on n[00-15] (16): torch is not importable by python3" in text
    assert "nothing measured" in text
    assert "no suspect" not in text
    assert "nothing measured" in fabric_section(outcome.section)
    assert fabric_exit_code(run) == 4
