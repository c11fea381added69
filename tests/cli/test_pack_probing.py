"""A rules file's `probing:` (what `fleet check` probes for it when -p and --sample are not given)
and `rules_from:` (rules taken from a built-in pack by id): the `health` pack probes only what
its rules read and samples the health counters; the command line overrides both.

End to end through the local transport, the health probe reading the real H200 capture through
the stand-in nvidia-smi (tests/fakes/bin/nvidia-smi)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from fleet.api import load_run
from fleet.api.checking import load_rule_set
from fleet.checks import RuleFileError, parse_rules_file
from fleet.execution.bundle import available_probes
from fleet.models import Run
from tests.conftest import FAKES, ROOT
from tests.integration.conftest import FleetResult, run_fleet

HEALTH_CAPTURE = ROOT / "tests" / "probes" / "golden" / "health" / "h200x2"
PROBES = tuple(available_probes())


def checked(tmp_path: Path, *args: str) -> tuple[FleetResult, dict]:
    inventory = tmp_path / "local.yaml"
    inventory.write_text(f"hosts:\n  h200: {{transport: local, python: {sys.executable}}}\n")
    out = tmp_path / "check.json"
    env = {
        "PATH": f"{FAKES / 'bin'}:{os.environ['PATH']}",
        "FLEET_FAKE_GPU_DIR": str(HEALTH_CAPTURE),
    }
    result = run_fleet(tmp_path, "check", "-i", str(inventory), "--json", str(out), *args, env=env)
    assert out.exists(), result.stderr
    return result, json.loads(out.read_text())


def saved_run(tmp_path: Path) -> Run:
    (path,) = (tmp_path / "state").rglob("runs/*.json")
    return load_run(path)


def quick_health_rules(tmp_path: Path) -> Path:
    """The health pack's shape with a half-second sample, so that the test hardly waits."""
    rules = tmp_path / "quick-health.yaml"
    rules.write_text(
        "probing: {probes: [system, health], sample: 0.5}\n"
        "rules_from: {pack: inference, ids: ['health-*']}\n"
    )
    return rules


def test_the_rules_files_probing_chooses_the_probes_and_the_sample(tmp_path: Path) -> None:
    result, document = checked(tmp_path, "--rules", str(quick_health_rules(tmp_path)))
    lines = result.stderr.splitlines()
    assert f"{tmp_path}/quick-health.yaml: probes system, health (-p to choose)" in lines
    assert any("health reads its counters twice, 0.5 s apart (--sample" in line for line in lines)
    run = saved_run(tmp_path)
    assert list(run.probes) == ["system", "health"]
    health = run.hosts["h200"].probes["health"]
    assert health.status == "ok", health
    assert health.data["sample"]["seconds"] >= 0.5
    health_rules = [r.id for r in load_rule_set(["inference"]).rules if r.id.startswith("health-")]
    assert [rule["id"] for rule in document["rules"]] == health_rules
    assert {rule["hosts"]["h200"]["verdict"] for rule in document["rules"]} >= {"pass"}


def test_the_command_line_overrides_the_rules_files_probing(tmp_path: Path) -> None:
    rules = quick_health_rules(tmp_path)
    result, _ = checked(tmp_path, "--rules", str(rules), "-p", "health", "--sample", "1")
    assert "(-p to choose)" not in result.stderr
    assert "(--sample to change)" not in result.stderr
    run = saved_run(tmp_path)
    assert list(run.probes) == ["health"]
    assert run.hosts["h200"].probes["health"].data["sample"]["seconds"] >= 1


def test_the_health_pack_is_the_inference_packs_health_rules_probed_for_health() -> None:
    health = load_rule_set(["health"])
    inference = {r.id: r for r in load_rule_set(["inference"]).rules}
    assert health.probing.probes == ("system", "gpu", "health", "net")
    assert health.probing.sample_s == 5
    assert health.rules
    for rule in health.rules:  # the same rule, from the same line of inference.yaml
        assert rule.source == inference[rule.id].source
        assert set(rule.needs) <= set(health.probing.probes)
    both = load_rule_set(["inference", "health"])
    assert len(both.rules) == len(inference)  # a rule both packs hold is judged once
    assert both.probing.probes is None  # inference reads every probe
    assert both.probing.sample_s == 5


def test_every_built_in_pack_loads_and_one_may_take_from_a_pack_that_takes() -> None:
    for name in ("inference", "health"):
        assert load_rule_set([name]).rules
    taken = parse_rules_file("rules_from: {pack: health, ids: [gpu-count]}\n", "x.yaml", PROBES)
    assert [r.id for r in taken.rules] == ["gpu-count"]
    assert taken.probing.probes is None  # a file's probing is its own, not its pack's


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("rules_from: {pack: nope, ids: [a]}\n", "there is no rule pack 'nope'"),
        ("rules_from: {pack: inference, ids: [nothing-*]}\n", "'nothing-*' matches no rule"),
        ("rules_from: {pack: inference}\n", "'rules_from:' is {pack: NAME, ids:"),
        (
            "probing: {probes: [helth]}\nrules_from: {pack: inference, ids: [gpu-count]}\n",
            "there is no probe 'helth'",
        ),
        (
            "probing: {sample: 600}\nrules_from: {pack: inference, ids: [gpu-count]}\n",
            "'sample:' is the seconds between the health probe's two reads, 0.5 to 60",
        ),
        (
            "probing: {every: 1}\nrules_from: {pack: inference, ids: [gpu-count]}\n",
            "'probing:' is {probes: [NAME, …], sample: SECONDS}",
        ),
    ],
)
def test_a_wrong_rules_from_or_probing_names_its_line(text: str, says: str) -> None:
    with pytest.raises(RuleFileError) as raised:
        parse_rules_file(text, "mine.yaml", PROBES)
    assert raised.value.message.startswith("mine.yaml:1: ")
    assert says in raised.value.message
