"""fleet fabric's pure parts: rounds, ranks, blame, results from rank lines, the run section."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.checks import evaluate, load_rules, pack_path
from fleet.errors import UsageError
from fleet.execution.bundle import available_probes
from fleet.fabric import plan
from fleet.fabric.blame import blame
from fleet.fabric.results import GroupResult, HostReport, SizeResult, conclude_group
from fleet.fabric.run import host_summary
from fleet.models import HostOutcome, ProbeResult, Run
from fleet.render.terminal.fabric import fabric_view

HOSTS = [f"h{i}" for i in range(7)]


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8])
def test_all_pairs_meet_once_in_rounds_of_disjoint_pairs(count: int) -> None:
    hosts = HOSTS[:count] if count <= 7 else [f"x{i}" for i in range(count)]
    rounds = plan.pair_rounds(hosts, plan.parse_pairs("all"))
    met = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, met)) == sorted(map(sorted, itertools.combinations(hosts, 2)))
    for current in rounds:
        seen = [h for p in current for h in p]
        assert len(seen) == len(set(seen))


@pytest.mark.parametrize("count", [2, 3, 5, 6])
def test_default_round_covers_every_host_and_rounds_stay_disjoint(count: int) -> None:
    rounds = plan.split_overlaps(plan.pair_rounds(HOSTS[:count], plan.parse_pairs("one")))
    assert {h for r in rounds for p in r for h in p} == set(HOSTS[:count])
    assert all(len({h for p in r for h in p}) == 2 * len(r) for r in rounds)


def test_ring_and_random_modes() -> None:
    ring = plan.pair_rounds(HOSTS[:5], plan.parse_pairs("ring"))
    assert len([p for r in ring for p in r]) == 5
    rounds = plan.pair_rounds(HOSTS[:6], plan.parse_pairs("random:3"), seed=7)
    assert len(rounds) == 3
    assert all(len(r) == 3 for r in rounds)
    assert rounds == plan.pair_rounds(HOSTS[:6], plan.parse_pairs("random:3"), seed=7)


def test_hosts_whose_partner_is_gone_get_another() -> None:
    assert plan.rescue_round(["c"], ["a", "b", "c"]) in ([("c", "a")], [("c", "b")])
    assert len(plan.rescue_round(["a", "b", "c"], ["a", "b", "c"])) == 2


@pytest.mark.parametrize("bad", ["", "random", "random:0", "pairs", "random:x"])
def test_bad_pair_modes_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError, match="not a pair mode"):
        plan.parse_pairs(bad)


def test_sizes_parse_with_units_and_refuse_nonsense() -> None:
    assert plan.parse_sizes("256M,8,64K,1MiB") == (8, 65536, 1 << 20, 256 << 20)
    for bad in ("", "12X", "4", "2G"):
        with pytest.raises(UsageError):
            plan.parse_sizes(bad)


def test_ranks_one_per_gpu_with_nccl_one_per_host_with_gloo_and_masters_avoid_failures() -> None:
    nccl = plan.place_ranks(("a", "b"), {"a": [0, 1], "b": [3]}, "nccl")
    assert [(p.host, p.rank, p.device) for p in nccl] == [("a", 0, 0), ("a", 1, 1), ("b", 2, 3)]
    gloo = plan.place_ranks(("a", "b"), {"a": [0, 1]}, "gloo")
    assert [(p.host, p.rank, p.device) for p in gloo] == [("a", 0, None), ("b", 1, None)]
    assert plan.with_master_first(("a", "b", "c"), frozenset({"a"})) == ("b", "a", "c")
    taken: set[int] = set()
    ports = [plan.pick_port(random.Random(1), taken) for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(plan.PORT_RANGE[0] <= port < 32768 for port in ports)  # below the ephemeral range


def test_ports_are_handed_out_again_once_the_range_is_spent() -> None:
    low, high = plan.PORT_RANGE
    taken = set(range(low, high + 1))  # thousands of groups had one each
    port = plan.pick_port(random.Random(1), taken)
    assert low <= port <= high
    assert taken == {port}


def ok(a: str, b: str, busbw: float) -> GroupResult:
    size = SizeResult(1 << 20, (1 << 20) / (busbw * 1e9), busbw, busbw, True)
    return GroupResult((a, b), "ok", 2, a, 1, (size,))


def all_pairs(speed: dict[frozenset[str], float], hosts: list[str]) -> list[GroupResult]:
    return [
        ok(a, b, speed.get(frozenset((a, b)), 10.0)) for a, b in itertools.combinations(hosts, 2)
    ]


def test_a_host_slow_with_most_partners_is_the_suspect() -> None:
    hosts = HOSTS[:4]
    pairs = all_pairs({frozenset(("h2", o)): 1.0 for o in hosts if o != "h2"}, hosts)
    suspects = blame(pairs, {})
    assert [(s.kind, s.hosts) for s in suspects] == [("host", ("h2",))]
    assert suspects[0].reason.startswith("bad with 3 of 3 partners")


def test_a_slow_pair_of_healthy_hosts_is_a_suspect_link() -> None:
    pairs = all_pairs({frozenset(("h0", "h1")): 2.0}, HOSTS[:4])
    suspects = blame(pairs, {})
    assert [(s.kind, set(s.hosts)) for s in suspects] == [("link", {"h0", "h1"})]
    assert suspects[0].factor == pytest.approx(5.0)


def test_one_bad_pair_alone_cannot_say_which_end() -> None:
    pairs = [ok("h0", "h1", 1.0), ok("h2", "h3", 10.0), ok("h4", "h5", 10.0)]
    assert [(s.kind, s.hosts) for s in blame(pairs, {})] == [("pair", ("h0", "h1"))]


def test_failures_count_against_hosts_skips_do_not_and_unreached_hosts_are_named() -> None:
    hosts = HOSTS[:4]
    pairs = all_pairs({}, hosts)
    pairs = [
        GroupResult(p.hosts, "failed", error="master h3: gone") if "h3" in p.hosts else p
        for p in pairs
    ]
    pairs.append(GroupResult(("h0", "h9"), "skipped", error="h9 not reached"))
    suspects = blame(pairs, {"h9": "cannot connect"})
    assert [(s.kind, s.hosts) for s in suspects] == [("host", ("h9",)), ("host", ("h3",))]


def lines(*messages: dict[str, object]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages) + b"NCCL INFO noise\n"


def report(rank: int, seconds: float, correct: bool = True) -> HostReport:
    host = HostReport()
    chunk = lines(
        {"type": "tick"},
        {"type": "joined", "rank": rank},
        {"type": "size", "rank": rank, "bytes": 8, "seconds": 1e-5, "correct": True},
        {"type": "size", "rank": rank, "bytes": 1 << 20, "seconds": seconds, "correct": correct},
        {"type": "rank_done", "rank": rank, "env": {"NCCL_DEBUG": "WARN"}},
        {"type": "done"},
    )
    host.feed(chunk[:17])  # lines split across chunks
    host.feed(chunk[17:])
    return host


def test_group_result_uses_the_slowest_rank_and_nccl_tests_busbw() -> None:
    placements = plan.place_ranks(("a", "b"), {}, "gloo")
    result = conclude_group(
        placements, {"a": report(0, 1e-3), "b": report(1, 2e-3)}, port=1, round_index=0
    )
    assert result.status == "ok"
    assert result.correct is True
    algbw = (1 << 20) / 2e-3 / 1e9
    assert result.busbw_gbps == pytest.approx(algbw * 2 * 1 / 2)
    assert result.latency_us == pytest.approx(10.0)
    assert result.env == {"a": {"NCCL_DEBUG": "WARN"}, "b": {"NCCL_DEBUG": "WARN"}}


def test_a_lost_host_is_blamed_not_the_partner_that_saw_it_go() -> None:
    placements = plan.place_ranks(("a", "b"), {}, "gloo")
    echo = HostReport()
    echo.feed(
        lines(
            {
                "type": "rank_error",
                "rank": 0,
                "stage": "allreduce",
                "error": "Traceback\nRuntimeError: Connection reset by peer",
            }
        )
    )
    lost = HostReport(failure="connection lost")
    result = conclude_group(placements, {"a": echo, "b": lost}, port=1, round_index=2)
    assert result.status == "failed"
    assert result.error == "b: connection lost"
    lonely = conclude_group(placements, {"a": echo, "b": report(1, 1e-3)}, port=1, round_index=0)
    assert (
        lonely.error
        == "master a: rank 0 failed to allreduce: RuntimeError: Connection reset by peer"
    )


def fabric_run(busbw: dict[str, float]) -> Run:
    pairs = [ok("a", "b", busbw["a"]), ok("b", "c", busbw["b"]), ok("a", "c", busbw["c"])]
    hosts = {}
    for name in ("a", "b", "c"):
        data = host_summary(name, pairs, [])
        data.update(backend="nccl", env={}, large_bytes=256 << 20)
        hosts[name] = HostOutcome(
            name, "ok", name, probes={"fabric": ProbeResult("ok", True, data, None, 0.0)}
        )
    return Run("0", "2026-01-01T00:00:00Z", "", "x", hosts, ("fabric",), fabric={"pairs": []})


def test_fabric_results_are_diffed_drifted_and_checked() -> None:
    old, new = fabric_run({"a": 40, "b": 40, "c": 40}), fabric_run({"a": 40, "b": 4, "c": 4})
    diff = compare_hosts(new.hosts.values(), declared_facts(), 0.25)
    assert not diff.values  # medians are measurements, partners are never divergence
    assert ("c", "fabric nccl 256 MiB busbw_gbps") in [(o.host, o.measure) for o in diff.outliers]
    assert compare_runs(old, new, declared_facts(), 0.25).found
    rules = load_rules(pack_path("inference"), available_probes())
    report = evaluate(rules, fabric_run({"a": 40, "b": 4, "c": 4}))  # c: 4 and 4; a, b: 40 and 4
    statuses = {(r.rule.id, v.host): v.status for r in report.results for v in r.verdicts}
    assert [statuses[("fabric-busbw", h)] for h in "abc"] == ["pass", "pass", "fail"]
    assert statuses[("fabric-correct", "a")] == "pass"
    assert statuses[("torch-arch-supported", "a")] == "skipped"  # no probe ran in a fabric run


def rendered(hosts: list[str], pairs: list[GroupResult], suspects: list[dict[str, object]]) -> str:
    from rich.console import Console

    section = {"backend": "gloo", "pair_mode": "all", "sizes": [1 << 20], "tolerance": 0.25,
               "median_busbw_gbps": 10.0, "pairs": [p.to_dict() for p in pairs], "ring": None,
               "suspects": suspects}  # fmt: skip
    console = Console(width=200, record=True)
    console.print(fabric_view(section, hosts))
    return console.export_text()


def test_terminal_shows_a_matrix_up_to_16_hosts_and_a_distribution_above() -> None:
    small = [f"n{i}" for i in range(4)]
    text = rendered(small, all_pairs({frozenset(("n0", "n1")): 2.0}, small), [])
    assert "busbw GB/s per pair" in text
    assert "no suspect" in text
    big = [f"n{i:02}" for i in range(20)]
    text = rendered(big, all_pairs({}, big), [{"kind": "host", "hosts": ["n03"], "reason": "x"}])
    assert "busbw GB/s per pair" not in text
    assert "busbw over 190 pairs (GB/s): min 10" in text
    assert "host  n03  x" in text
