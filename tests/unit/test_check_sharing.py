"""Judging a rule once per group of alike hosts gives every host the verdict judging it alone
gives (fleet.checks.sharing, fleet.checks.reads): rules that read what hosts differ in (GPU
UUIDs, hostnames, the allreduce rows, the host's name, the whole document) are judged per host."""

from __future__ import annotations

import marshal
import random
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from fleet.analysis.classes import Dump, dump_of
from fleet.analysis.facts import declared_facts
from fleet.checks import HostDocuments, Reads, evaluate, load_rules, pack_path, parse_rules, seen
from fleet.execution.bundle import available_probes
from tests.unit.helpers import fleet_run

TRICKY = """
rules:
  - {id: uuid-pinned, check: "gpu.gpus[0].uuid == 'GPU-000003-0'", fix: '{gpu.gpus[0].uuid}'}
  - {id: same-uuids, uniform: "gpu.gpus[*].uuid", fix: '{hosts}'}
  - {id: hostname, check: "starts_with(system.hostname, 'gpu-0000')", fix: '{system.hostname}'}
  - {id: whole-gpus, check: "length(to_string(gpu.gpus)) > `10`", fix: '{observed}'}
  - {id: gpu-count, check: "length(gpu.gpus) == `2`", observed: "length(gpu.gpus)", fix: '{observed}'}
  - {id: own-name, check: "_host.name != 'gpu-00005'", fix: '{observed}'}
  - {id: whole-document, check: "length(keys(@)) > `3`", observed: "keys(@)", fix: '{observed}'}
  - {id: rows, check: "allreduce.results[?bytes == `8`] | length(@) > `0`", fix: '{observed}'}
  - {id: latency, check: "_allreduce.small_latency_us.eager < `1000`", observed: "_allreduce", fix: '{observed}'}
  - {id: mig, check: "none(map(&mig_mode, gpu.gpus), 'Enabled')", observed: "map(&uuid, gpu.gpus)", fix: '{observed}'}
"""


class Alone(HostDocuments):
    """Every host its own group: each rule judged on each host."""

    def key(self, plan: Any, name: str) -> Hashable:
        return name


def test_sharing_gives_each_host_its_own_verdict(tmp_path: Path) -> None:
    run = fleet_run(40, tmp_path)
    rules = [
        *load_rules(pack_path("inference"), available_probes()),
        *parse_rules(TRICKY, "tricky.yaml", available_probes()),
    ]
    shared = HostDocuments(run.hosts, {}, declared_facts())
    alone = Alone(run.hosts, {}, declared_facts())
    assert (
        evaluate(rules, run, {}, documents=shared).to_dict()
        == evaluate(rules, run, {}, documents=alone).to_dict()
    )
    assert shared.searches < alone.searches / 3  # most rules were judged once per group
    report = evaluate(rules, run, {}, documents=shared)
    verdicts = {r.rule.id: {v.host: v for v in r.verdicts} for r in report.results}
    assert [h for h, v in verdicts["uuid-pinned"].items() if v.status == "pass"] == ["gpu-00003"]
    assert verdicts["own-name"]["gpu-00005"].status == "fail"
    assert verdicts["mig"]["gpu-00001"].observed != verdicts["mig"]["gpu-00010"].observed


def _slow_walk(node, path, at, out):  # type: ignore[no-untyped-def]
    """Every (where, value) that `path` reaches in `node`, the obvious recursive way."""
    if not path:
        out.append((at, node))
    elif isinstance(node, dict) and path[0] == "*":
        for key, value in node.items():
            _slow_walk(value, path[1:], (*at, key), out)
    elif isinstance(node, dict) and isinstance(path[0], str):
        for key, value in node.items():
            if str(key) == path[0]:
                _slow_walk(value, path[1:], (*at, key), out)
    elif isinstance(node, list) and path[0] == "*":
        for index, value in enumerate(node):
            _slow_walk(value, path[1:], (*at, index), out)
    elif isinstance(node, list) and type(path[0]) is int and path[0] < len(node):
        _slow_walk(node[path[0]], path[1:], (*at, path[0]), out)


def _random_value(rng: random.Random, depth: int = 0):  # type: ignore[no-untyped-def]
    kind = rng.random()
    if depth > 3 or kind < 0.3:
        return rng.choice([1, "x", None, True, 2.5])
    if kind < 0.6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        rng.choice(["a", "b", 1, "c"]): _random_value(rng, depth + 1)
        for _ in range(rng.randint(0, 4))
    }


def _slow_shape(value: Any) -> Any:
    if isinstance(value, dict):
        return ("object", tuple(map(str, value)))
    if isinstance(value, list):
        return ("array", len(value))
    return ("value", value)


def test_what_a_rule_sees_of_a_payload_is_read_as_the_slow_walk_reads_it() -> None:
    """Two payloads seen alike through a path (read whole, or only its shape) are alike there
    as the slow walk finds them; seen as the walk's text but where every row of a list is an
    object with the field read (or, for a shape, an object): then in one piece."""
    rng = random.Random(25)
    walks: dict[tuple[Any, ...], Dump] = {}  # (path, read whole, what was seen) → the walk
    in_one_piece = 0
    for _ in range(5000):
        data = _random_value(rng)
        path = tuple(rng.choice(["a", "b", "*", 0, 1]) for _ in range(rng.randint(0, 3)))
        slow: list[tuple[tuple[object, ...], object]] = []
        _slow_walk(data, path, (), slow)
        for whole in (True, False):
            reads = Reads(consumed={path}) if whole else Reads(shaped={path})
            walk = dump_of([slow] if whole else [[(at, _slow_shape(v)) for at, v in slow]])
            view = seen(data, reads)
            assert walks.setdefault((path, whole, view), walk) == walk, (data, path, whole)
            if view != walk:
                shown = marshal.loads(view) if isinstance(view, bytes) else view
                assert shown[0][0] in ("rows", "row keys"), (data, path, shown)
                in_one_piece += 1
    assert in_one_piece > 10  # (31 with this seed)


def test_rows_seen_in_one_piece_tell_apart_what_the_path_reads() -> None:
    rows = [{"bytes": 8, "correct": True, "latency_us": 26.4}, {"bytes": 16, "correct": True}]
    other = [{**row, "latency_us": 1.0} for row in rows]  # differs only where not read
    field = Reads(consumed={("results", "*", "bytes")})
    keys = Reads(shaped={("results", "*")})
    assert seen({"results": rows}, field) == seen({"results": other}, field)
    assert seen({"results": rows}, field) != seen({"results": rows[:1]}, field)
    assert seen({"results": rows}, field) != seen({"results": [*rows, {"bytes": None}]}, field)
    assert seen({"results": rows}, keys) != seen({"results": other}, keys)  # its keys differ
    assert seen({"results": other}, keys) == seen({"results": [other[0], other[0]]}, keys)
