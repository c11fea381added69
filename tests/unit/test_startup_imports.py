"""What `fleet probe` and `fleet check` load before the hosts start: the plan (hosts, bundle, the
inputs that can be wrong), not the judging. The default pack and the analysis, findings and
rules modules are read on a thread once the first host runs (fleet.api.judging.RulesLater), so
the hosts do not wait for them; these tests hold both halves."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.api import commands, judging
from fleet.api.checking import load_rule_set
from fleet.api.hosts import Selection, select_hosts
from fleet.api.judging import Judging, Prepared, RulesLater, prepare
from fleet.api.probing import ProbeOptions

ROOT = Path(__file__).resolve().parents[2]
PROBES = ("system", "packages", "gpu", "torch", "nccl", "health")

# The judging's modules: none of them is needed to start the hosts.
JUDGING = ("fleet.api.assessing", "fleet.checks", "fleet.findings", "fleet.analysis.across_hosts")
# What of fleet.checks the findings and `fleet probe` read without the rules engine.
LIGHT = ("fleet.checks.actions", "fleet.checks.packs")

PLAN = """
import json, sys
from fleet.cli import probe  # the command's module, as `fleet probe` loads it
from fleet.api.commands import ProbePlan
from fleet.api.hosts import Selection, select_hosts
from fleet.api.judging import Judging
from fleet.api.probing import ProbeOptions
plan = ProbePlan.make(Judging(rules=True), ProbeOptions(probes=["system"]), lambda: select_hosts())
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by_plan() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PLAN], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return list(json.loads(done.stdout))


def test_planning_a_probe_loads_none_of_the_judging() -> None:
    loaded = loaded_by_plan()
    early = [m for m in loaded if any(m == j or m.startswith(j + ".") for j in JUDGING)]
    assert early == []
    assert "rich.progress" not in loaded  # the live bar: only on a terminal
    assert "ClusterShell" not in loaded  # this machine: one name, nothing to expand or fold
    # nor what keeps the run (the store, the run writer) and no YAML parser: read while the
    # hosts work (fleet.cli.probing.KEEPING), or not at all
    assert [
        m for m in loaded if m in ("fleet.store", "fleet.rundoc", "fleet.api.runs", "yaml")
    ] == []


def test_the_default_pack_asks_for_no_probing_of_its_own() -> None:
    """RulesLater reads it after the probes are chosen: it must not choose any."""
    probing = load_rule_set().probing
    assert probing.probes is None
    assert probing.sample_s is None


def test_rules_read_later_are_the_rules_prepare_reads() -> None:
    now = prepare(Judging(rules=True))
    later = RulesLater(Judging(rules=True, gate=True), PROBES)  # fleet check: all of them
    later.start()
    joined = later.joined(Prepared())
    assert [r.id for r in joined.rules] == [r.id for r in now.rules]
    assert joined.sources == now.sources == ("pack inference",)
    never_started = RulesLater(Judging(rules=True, gate=True), PROBES)
    assert never_started.joined(Prepared()).rules == joined.rules


def test_only_the_default_pack_alone_is_read_later() -> None:
    assert RulesLater.applies(Judging(rules=True))
    assert not RulesLater.applies(Judging(rules=False))
    assert not RulesLater.applies(Judging(rules=True, packs=("health",)))  # has `probing:`
    assert not RulesLater.applies(Judging(rules=True, rules_files=("mine.yaml",)))


def test_a_user_rules_file_is_still_read_before_any_host(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [{id: x, check: 'system.('}]\n")
    selected: list[int] = []

    def select() -> Selection:
        selected.append(1)
        return select_hosts()

    with pytest.raises(Exception, match=r"bad\.yaml"):
        commands.ProbePlan.make(
            Judging(rules=True, rules_files=(str(bad),)), ProbeOptions(probes=["system"]), select
        )
    assert selected == []  # failed before the hosts were even chosen


def test_what_reading_later_raised_is_raised_when_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(judging: Judging, run_probes: object = (), among: object = None) -> None:
        raise OSError("the pack went away")

    monkeypatch.setattr(judging, "read_rules", broken)
    later = RulesLater(Judging(rules=True), PROBES)
    later.start()
    with pytest.raises(OSError, match="went away"):
        later.joined(Prepared())


def test_the_plan_reads_the_default_pack_while_the_host_runs(tmp_path: Path) -> None:
    """A real run of this machine: the plan holds no rules until the host runs, and the
    assessment judges with the whole pack."""
    check = Judging(rules=True, gate=True)  # fleet check: every rule of the pack reported
    plan = commands.ProbePlan.make(check, ProbeOptions(probes=["system"]), lambda: select_hosts())
    assert plan.later is not None
    assert plan.prepared.rules == ()
    probed = asyncio.run(plan.run(save=False))
    assert probed.assessment.checks is not None
    judged = [r.rule.id for r in probed.assessment.checks.results]
    assert judged == [rule.id for rule in prepare(check).rules]


AS_THE_EXECUTABLE = """
import json, os, runpy, sys
out, sys.argv = sys.argv[1], ["fleet", *sys.argv[2:]]
def dump_modules():
    with open(out, "w") as handle:
        json.dump(sorted(sys.modules), handle)
leave = os._exit  # how the executable ends, after flushing
os._exit = lambda code: (dump_modules(), leave(code))
runpy.run_module("fleet", run_name="__main__", alter_sys=True)
dump_modules()
"""


def test_a_probe_no_rule_reads_loads_no_rules_engine(tmp_path: Path) -> None:
    """`fleet probe -p system`: no rule of the default pack reads only `system` (its index says
    so), so neither the pack is parsed nor the rules engine loaded; what it prints and writes is
    what it was when every rule was parsed and none judged (the run document is checked here)."""
    run, modules = tmp_path / "run.json", tmp_path / "modules.json"
    argv = ["probe", "-p", "system", "--no-save", "--json", str(run)]
    done = subprocess.run(
        [sys.executable, "-c", AS_THE_EXECUTABLE, str(modules), *argv],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(modules.read_text())
    engine = [m for m in loaded if m.startswith(("jmespath", "fleet.checks.")) and m not in LIGHT]
    assert engine == []
    assert "fleet.api.checking" not in loaded  # the default pack's name is a leaf's
    assert "fleet.analysis.across_runs.drift" not in loaded  # no --baseline: no drift
    # this machine: no YAML file to read, no SSH host to configure, no worker to start
    assert [m for m in loaded if m == "yaml" or m.startswith("yaml.")] == []
    assert "fleet.inventory.openssh" not in loaded
    assert "fleet.execution.workers" not in loaded
    # the units of probes that did not run: only their options (`probe` parts, the command
    # line's), none of the parts that read results (key facts, results' declarations, views)
    others = [m for m in loaded if m.startswith("fleet.units.") and m.count(".") > 2]
    assert [m for m in others if not m.endswith(".probe")] == ["fleet.units.system.facts"]
    assert json.loads(run.read_text())["hosts"]["local"]["status"] == "ok"
    assert "fleet.checks.actions" in loaded  # the list is read right
    later = RulesLater(Judging(rules=True), ["system"])
    assert later.joined(Prepared()).rules == ()
    assert later.joined(Prepared()).sources == ("pack inference",)


def test_a_probe_some_rules_read_still_judges_them() -> None:
    later = RulesLater(Judging(rules=True), ["system", "packages", "gpu", "torch"])
    read = [rule.id for rule in later.joined(Prepared()).rules]
    assert read
    assert read == [
        r.id
        for r in prepare(Judging(rules=True)).rules
        if set(r.needs) <= {"system", "packages", "gpu", "torch"}
    ]


COLLECTOR = """
import gc
import click
import fleet.__main__  # as the executable starts: its modules load with the collector paused
print(gc.isenabled(), gc.get_freeze_count() > 0)
from fleet.cli.root import main
main.get_command(click.Context(main), "runs")  # the command's module loaded: back on, frozen
print(gc.isenabled(), gc.get_freeze_count() > 0)
"""


def test_the_executable_loads_with_the_collector_paused_then_turns_it_back_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[:2] == ["False False", "True True"]


def test_fleet_called_in_process_keeps_its_collector_as_it_is() -> None:
    import gc

    import click

    from fleet.cli.root import main

    assert gc.isenabled()
    main.get_command(click.Context(main), "runs")
    assert gc.isenabled()


SSH_TRANSPORT = """
import gc
passes = [0]
gc.callbacks.append(lambda phase, info: passes.__setitem__(0, passes[0] + (phase == "stop")))
EXECUTABLE
import click
from fleet.cli.root import main
main.get_command(click.Context(main), "probe")
from fleet.api.probing import make_transports
from fleet.models import Host
frozen, before = gc.get_freeze_count(), passes[0]
make_transports([Host(name="h", address="127.0.0.1")], accept_new=False)
print(passes[0] - before, gc.isenabled(), gc.get_freeze_count() > frozen)
"""


@pytest.mark.parametrize(
    ("executable", "expected"),
    [("import fleet.__main__", "0 True True"), ("", "collected True False")],
)
def test_the_ssh_transport_loads_with_the_collector_paused_in_the_executable(
    executable: str, expected: str
) -> None:
    """asyncssh and cryptography load with the first SSH host, after the command's start-up: the
    executable pauses the collector over them too (fleet.collector.loading_more) and freezes what
    they made; fleet called in-process keeps its collector as it is, passes and all."""
    code = SSH_TRANSPORT.replace("EXECUTABLE", executable)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    passes, enabled, frozen = done.stdout.split()
    assert (passes if passes == "0" else "collected", enabled, frozen) == tuple(expected.split())


def test_a_small_inventory_file_starts_no_seed_and_loads_no_worker_module(tmp_path: Path) -> None:
    """The README's `fleet probe -i inventory/local.yaml`: a file under EARLY_SEED_BYTES, so the
    early-seed decision (a stat) loads no worker module, as the run without a file."""
    modules = tmp_path / "modules.json"
    argv = ["probe", "-i", "inventory/local.yaml", "-p", "system", "--no-save"]
    done = subprocess.run(
        [sys.executable, "-c", AS_THE_EXECUTABLE, str(modules), *argv],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fleet.execution.workers" not in json.loads(modules.read_text())
