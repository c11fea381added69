"""`fleet check` stays linear in hosts (issue 25), asserted by counting operations, not by timing.

The fleet is the golden 8-host loopback run repeated under unique names (as bench/check_scale.py
does): gpu-08's twins, one in eight, fail two rules alike, and one of those rules names them all
in its fix (`{hosts}`). Judging and rendering N and 2N hosts is profiled: twice the hosts may cost
at most 2.5 times the Python calls and the host-name folds (the fold of `{hosts}` used to be
rebuilt for every failing host: N/8 folds of N/8 names, four times the work per doubling).
"""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from fleet.checks import CheckReport, Rule, evaluate, load_rules, pack_path, parse_rules
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.render.terminal.checks import render_report
from tests.conftest import ROOT
from tests.unit.helpers import calls

LOOPBACK8 = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
HOSTS = 64
LINEAR = 2.5  # the most that twice the hosts may cost


def fleet_run(count: int, own_keys: bool = False) -> Run:
    """`own_keys`: each host's NCCL environment also sets a variable no other host sets."""
    real = json.loads(LOOPBACK8.read_text())
    originals = list(real["hosts"].values())
    hosts = {}
    for index in range(count):
        name = f"gpu-{index + 1:05d}"
        host = copy.deepcopy(originals[index % len(originals)])
        host["probes"]["system"]["data"]["hostname"] = name
        if own_keys:
            host["probes"]["nccl"]["data"]["env"][f"NCCL_TAG_{index}"] = "1"
        hosts[name] = host
    return Run.from_dict({**real, "hosts": hosts})


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules(pack_path("inference"), available_probes())


def costs(
    work: Callable[[Any], object],
    prepare: Callable[[Run], Any] = lambda run: run,
    own_keys: bool = False,
) -> tuple[Counter[str], Counter[str]]:
    """What `work` calls on N hosts, and on 2N (on what `prepare` made of the run, uncounted)."""
    found = []
    for count in (HOSTS, 2 * HOSTS):
        prepared = prepare(fleet_run(count, own_keys))
        with calls() as counted:
            work(prepared)
        found.append(counted)
    return found[0], found[1]


def assert_linear(small: Counter[str], large: Counter[str], name: str) -> None:
    assert small[name] > 0, f"nothing called {name}: the fleet no longer exercises it"
    assert large[name] < LINEAR * small[name], (name, small[name], large[name])


def test_judging_twice_the_hosts_costs_twice_the_work(rules: list[Rule]) -> None:
    small, large = costs(lambda run: evaluate(rules, run))
    assert sum(large.values()) < LINEAR * sum(small.values())
    assert_linear(small, large, "compact_hosts")  # host names folded (fleet.hostsets)
    assert_linear(small, large, "search")  # one JMESPath expression on one host
    # `{hosts}` is folded once per group of hosts that failed alike, however large the group
    assert large["compact_hosts"] == small["compact_hosts"] == 1


def test_rendering_twice_the_hosts_costs_twice_the_work(rules: list[Rule]) -> None:
    def render(report: CheckReport) -> None:
        render_report(Console(file=io.StringIO(), width=100), report)
        json.dumps(report.to_dict())

    small, large = costs(render, prepare=lambda run: evaluate(rules, run))
    assert sum(large.values()) < LINEAR * sum(small.values())
    assert_linear(small, large, "compact_hosts")


def test_uniform_keys_with_a_key_per_host_costs_twice_the_work() -> None:
    """Every host sets a variable of its own: N keys in the cohort, each unset on all hosts but
    one. Judging a host must not read every key of the cohort (that was N × N comparisons)."""
    rules = parse_rules(
        "rules: [{id: same-nccl, uniform_keys: nccl.env, fix: '{hosts}: {observed}'}]",
        "rules.yaml",
        available_probes(),
    )
    small, large = costs(lambda run: evaluate(rules, run), own_keys=True)
    assert sum(large.values()) < LINEAR * sum(small.values())
    assert_linear(small, large, "value_key")  # one value made comparable


def test_a_key_of_its_own_fails_only_its_host() -> None:
    rules = parse_rules(
        "rules: [{id: same-nccl, uniform_keys: nccl.env, fix: '{observed}'}]",
        "rules.yaml",
        available_probes(),
    )
    report = evaluate(rules, fleet_run(8, own_keys=True))
    verdicts = {v.host: v for v in report.results[0].verdicts}
    assert {h: v.status for h, v in verdicts.items()} == dict.fromkeys(verdicts, "fail")
    assert verdicts["gpu-00003"].observed == {"NCCL_TAG_2": "1"}
    assert verdicts["gpu-00003"].expected == {"NCCL_TAG_2": None}
    assert verdicts["gpu-00008"].observed == {"NCCL_P2P_DISABLE": "1", "NCCL_TAG_7": "1"}
