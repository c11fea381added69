"""The report's map, the rules' views, the not-judged list and the JSON writer cost per distinct
split, payload shape, reason or host list, not per fact, row, rule or mention (issue 49),
asserted by counting calls, not by timing."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.api import cross_host_diff
from fleet.checks import Reads, evaluate, load_rules, pack_path, seen
from fleet.execution.bundle import available_probes
from fleet.jsontext import dumps_indented
from fleet.render.html.divmap import map_rows
from fleet.render.terminal.run import key_facts, key_facts_table
from tests.unit.helpers import calls, fleet_run

HOSTS = 48


def test_the_map_splits_the_hosts_once_per_split(tmp_path: Path) -> None:
    """The facts that split the hosts alike (the same host tuples) share one split by cohort."""
    diff = cross_host_diff(fleet_run(HOSTS, tmp_path))
    splits = {tuple(id(hosts) for _, hosts in d.groups) for d in diff.values}
    with calls() as made:
        rows = map_rows(diff)
    assert made["divergence_row"] > 2 * len(splits)  # the fleet still has facts split alike
    assert 0 < made["_by_group"] <= len(splits) * len(diff.cohorts)
    assert len(rows) >= made["divergence_row"]


def test_rows_are_seen_without_a_call_per_row() -> None:
    rows = [{"bytes": 2**i, "correct": True, "latency_us": 1.0 + i} for i in range(200)]
    reads = Reads(consumed={("results", "*", "bytes"), ("all_correct",)}, shaped={("results", "*")})
    with calls() as made:
        seen({"results": rows, "all_correct": True}, reads)
    assert made["_matches"] + made["_items_key"] + made["_shape"] < 10


def test_each_reason_and_its_hosts_are_checked_once(tmp_path: Path) -> None:
    """Many rules leave the same hosts unjudged for the same reason (a probe not run): whether
    the reason names a host is worked out once per reason and host list, not once per rule."""
    rules = load_rules(pack_path("inference"), available_probes())
    report = evaluate(rules, fleet_run(HOSTS, tmp_path), {})
    with calls() as made:
        not_judged = report.not_judged()
    assert sum(len(n.rules) for n in not_judged) > 3 * len(not_judged)
    assert 0 < made["_names_any"] <= len(not_judged)


def test_a_long_list_met_again_is_compared_not_read_again() -> None:
    names = [f"gpu-{i:05d}" for i in range(2000)]
    document = {"facts": [{"fact": str(i), "hosts": list(names)} for i in range(50)]}
    with calls() as made:
        text = dumps_indented(document)
    assert text == json.dumps(document, indent=2)
    assert made["_flat_list"] == 1  # the first list; the other 49 compared equal to it
    assert made["_written"] == 51  # each list looked up, the outer one too


def test_key_facts_are_looked_up_once_per_set_of_payloads(tmp_path: Path) -> None:
    """`fleet show`'s key facts: hosts holding the same payload objects (a saved run keeps each
    distinct payload once) get one lookup per fact; only own payloads (GPU UUIDs) cost one a
    host."""
    run = fleet_run(HOSTS, tmp_path)
    reporting = [o for o in run.hosts.values() if o.probes]
    ran = {probe for outcome in reporting for probe in outcome.probes}
    answers = 0  # per fact, the distinct sets of payload objects its probes hold
    for _, paths in key_facts(ran):
        probes = sorted({str(path[0]) for path in paths})
        held = [
            [id(o.probes[p].data) if p in o.probes else None for p in probes] for o in reporting
        ]
        answers += len({tuple(ids) for ids in held})
    with calls() as made:
        table = key_facts_table(run.hosts.values())
    assert table is not None
    assert 0 < made["_fact_text"] <= answers < made["_fact_texts"] * len(reporting) * 0.6
