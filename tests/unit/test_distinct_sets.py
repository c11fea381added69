"""Rules are judged once per distinct set of facts, not once per host (issue 49): 200 hosts made
of 4 distinct fact sets (each host with its own name, address, hostname, GPU UUIDs and serials,
and timings: what the comparison leaves out) cost the JMESPath searches 4 hosts cost, and every
host gets the verdict that judging it alone gives. Counted, not timed."""

from __future__ import annotations

import copy
import random
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from fleet.analysis.facts import FactCache, declared_facts, run_declarations
from fleet.api import cross_host_diff
from fleet.checks import HostDocuments, evaluate, load_rules, pack_path
from fleet.checks.model import _names_any
from fleet.execution.bundle import available_probes
from fleet.models import Run
from tests.unit.helpers import saved_run, templates

SETS = 4
DISTINCT = (0, 1, 4, 7)  # of templates(): the real H200 host, loopback gpu-01, gpu-04, gpu-07


class Alone(HostDocuments):
    """Every host its own group: each rule judged on each host."""

    def key(self, plan: Any, name: str) -> Hashable:
        return name


def distinct_sets_run(count: int, folder: Path) -> Run:
    """`count` hosts, host i a copy of captured host i % SETS under its own identity."""
    captured = templates()
    sources = [captured[i] for i in DISTINCT]
    hosts = {}
    for index in range(count):
        name = f"node-{index:04d}"
        host = copy.deepcopy(sources[index % SETS])
        host["address"] = f"10.1.{index // 256}.{index % 256}"
        host["elapsed_s"] = 5.0 + index / 1000
        for probe, result in host["probes"].items():
            result["elapsed_s"] = 0.1 + index / 10000
            if probe == "system":
                result["data"]["hostname"] = name
            for gpu in result["data"].get("gpus") or [] if probe == "gpu" else []:
                gpu["uuid"] = f"GPU-{index:06d}-{gpu['index']}"
                gpu["serial"] = f"{1650000000000 + index * 16 + gpu['index']}"
        hosts[name] = host
    return saved_run(hosts, folder)


def test_rules_are_judged_per_distinct_set_not_per_host(tmp_path: Path) -> None:
    rules = load_rules(pack_path("inference"), available_probes())
    searched = {}
    for count in (SETS, 200):
        run = distinct_sets_run(count, tmp_path / str(count))
        shared = HostDocuments(run.hosts, {}, declared_facts())
        report = evaluate(rules, run, {}, documents=shared)
        assert len(shared.members) == SETS  # the hosts, grouped by what they reported
        searched[count] = shared.searches
    alone = Alone(run.hosts, {}, declared_facts())
    assert report.to_dict() == evaluate(rules, run, {}, documents=alone).to_dict()
    assert searched[200] == searched[SETS]  # 4 sets: the searches of 4 hosts, not 200
    assert alone.searches == 200 // SETS * searched[SETS]  # judged alone: per host


def test_the_diff_and_the_rules_class_the_payloads_once(tmp_path: Path) -> None:
    run = distinct_sets_run(40, tmp_path)
    classes = FactCache(run_declarations([run]))
    cross_host_diff(run, classes=classes)
    flattened = classes.flattened
    rules = load_rules(pack_path("inference"), available_probes())
    shared = HostDocuments(run.hosts, {}, declared_facts(), classes)
    assert shared.classes is classes  # the same declarations: the diff's classes
    assert evaluate(rules, run, {}, documents=shared).to_dict() == (
        evaluate(rules, run, {}).to_dict()
    )
    assert classes.flattened == flattened  # nothing flattened again for the rules


def test_whether_a_reason_names_one_of_its_hosts_is_found_as_by_searching_each() -> None:
    rng = random.Random(49)
    for _ in range(3000):
        hosts = [rng.choice(["gpu-01", "gpu-1", "n", "node-0003", "a.b", ""]) for _ in range(3)]
        text = " ".join(
            rng.choice(["on", "gpu-01", "gpu-", "1", "node-000", "a.b:", "x"]) for _ in range(4)
        )
        assert _names_any(text, hosts) == any(host in text for host in hosts), (text, hosts)
