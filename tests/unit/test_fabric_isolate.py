"""The isolation planner (fleet/fabric/isolate.py) against a simulated network: which hosts and
links it names, in how many rounds, and that every round's groups are disjoint. Counts, not
timings (those are in bench/fabric_isolate.py)."""

from __future__ import annotations

import math
import random

import pytest

from fleet.fabric.isolate import (
    IsolateSettings,
    Isolation,
    Measured,
    edges_across,
    pairs_all_cost,
    ring_edges,
    screen_groups,
)
from tests.fabric.network_model import SimulatedFabric, isolate, names, random_fleet


def run_checked(fabric: SimulatedFabric, settings: IsolateSettings | None = None) -> Isolation:
    """The planner against `fabric`, asserting each round's groups are disjoint and real."""
    planner = Isolation(fabric.hosts, settings or IsolateSettings())
    groups = planner.first_round()
    while groups:
        seen = [h for g in groups for h in g]
        assert len(seen) == len(set(seen)), f"round {planner.rounds} reuses a host: {groups}"
        assert set(seen) <= set(fabric.hosts)
        assert all(len(g) >= 2 for g in groups)
        groups = planner.next_round([fabric.run(g) for g in groups])
    return planner


def named(planner: Isolation) -> list[tuple[str, list[str]]]:
    return sorted((n.kind, sorted(n.hosts)) for n in planner.named)


def test_screen_is_disjoint_groups_of_about_root_n_covering_every_host() -> None:
    hosts = names(1000)
    groups = screen_groups(hosts, IsolateSettings())
    assert sorted(h for g in groups for h in g) == hosts
    assert {len(g) for g in groups} <= {31, 32, 33}
    assert len(groups) == 31


def test_small_fleet_with_a_floor_is_screened_whole() -> None:
    assert screen_groups(names(16), IsolateSettings(floor_gbps=50.0)) == [tuple(names(16))]
    assert screen_groups(names(3), IsolateSettings()) == [tuple(names(3))]
    assert screen_groups(names(1), IsolateSettings()) == []


def test_links_across_a_cut_are_the_two_the_halves_lose() -> None:
    group = ("a", "b", "c", "d", "e", "f")
    assert ring_edges(group)[-1] == ("f", "a")
    assert edges_across(group) == [("c", "d"), ("f", "a")]


def test_pairs_all_cost_is_the_circle_method() -> None:
    assert pairs_all_cost(16) == {"rounds": 15, "group_runs": 120}
    assert pairs_all_cost(15) == {"rounds": 15, "group_runs": 105}


def test_no_fault_is_one_round_and_nothing_named() -> None:
    planner = run_checked(SimulatedFabric(names(1024), rng=random.Random(3)))
    assert (planner.rounds, planner.group_runs, planner.named) == (1, 32, [])


def test_one_slow_host_is_named_with_its_evidence() -> None:
    fabric = SimulatedFabric(names(64), {"h00013": 0.3}, rng=random.Random(1))
    planner = run_checked(fabric)
    assert named(planner) == [("host", ["h00013"])]
    evidence = planner.suspects()[0].evidence
    assert [e.purpose for e in evidence] == ["screen", "bisect", "bisect", "confirm", "rerun"]
    assert all(e.bad and "h00013" in e.hosts for e in evidence)
    assert evidence[-1].expected_gbps is not None
    assert evidence[-1].busbw_gbps is not None
    assert evidence[-1].busbw_gbps < evidence[-1].expected_gbps
    assert planner.rounds <= 1.5 * math.log2(64) + 6


def test_a_slow_link_is_told_from_its_hosts() -> None:
    fabric = SimulatedFabric(names(16), bad_links={frozenset({"h00005", "h00006"}): 0.3})
    planner = run_checked(fabric)
    assert named(planner) == [("link", ["h00005", "h00006"])]
    purposes = [e.purpose for e in planner.suspects()[0].evidence]
    assert purposes.count("confirm") == 2  # each end with a good host, both fine
    assert planner.rounds <= 10


def test_a_link_the_cut_breaks_is_found_across_it() -> None:
    # h00001-h00002 are ring neighbours in the screen group h0..h3, but the halves are h0,h1 | h2,h3
    fabric = SimulatedFabric(names(16), bad_links={frozenset({"h00001", "h00002"}): 0.3})
    planner = run_checked(fabric)
    assert named(planner) == [("link", ["h00001", "h00002"])]
    assert "across" in [e.purpose for e in planner.evidence]


def test_a_failing_host_is_named_like_a_slow_one() -> None:
    class Failing(SimulatedFabric):
        def run(self, group: tuple[str, ...]) -> Measured:
            if "h00007" in group:
                return Measured(group, False, None, "h00007: rank 0 exited with code 1")
            return super().run(group)

    planner = run_checked(Failing(names(64)))
    assert named(planner) == [("host", ["h00007"])]
    assert planner.suspects()[0].evidence[0].why == "h00007: rank 0 exited with code 1"


def test_noise_once_is_cleared_not_named() -> None:
    class OnceSlow(SimulatedFabric):
        seen = 0

        def run(self, group: tuple[str, ...]) -> Measured:
            if "h00003" in group and len(group) == 2:
                self.seen += 1
                if self.seen == 1:  # only its first pair is slow
                    return Measured(group, True, 10.0)
            return super().run(group)

    planner = run_checked(OnceSlow(names(4), {"h00003": 1.0}))
    assert planner.named == []
    assert [(c.kind, c.hosts) for c in planner.cleared] == [("link", ("h00002", "h00003"))]


def test_two_hosts_without_a_good_one_are_an_undecided_pair() -> None:
    planner = run_checked(SimulatedFabric(names(2)), IsolateSettings(floor_gbps=500.0))
    assert named(planner) == [("pair", ["h00000", "h00001"])]
    assert "undecided" in planner.named[0].reason


@pytest.mark.parametrize("bad", [1, 2, 3])
def test_at_1024_hosts_exact_identification_within_the_round_bound(bad: int) -> None:
    rng = random.Random(bad)
    bound = 1.5 * bad * math.log2(1024 / bad) + 6
    exact = 0
    for _ in range(60):
        hosts = rng.randint(0, bad)
        outcome = isolate(random_fleet(1024, hosts, bad - hosts, rng))
        assert outcome.rounds <= bound
        exact += outcome.exact
    assert exact >= 57  # ≥ 95%


def test_at_twenty_thousand_hosts_it_names_the_bad_ones() -> None:
    fabric = random_fleet(20_000, 2, 1, random.Random(5))
    outcome = isolate(fabric)
    assert outcome.exact, (fabric.truth(), outcome.named)
    assert outcome.rounds <= 1.5 * 3 * math.log2(20_000 / 3) + 6
    assert outcome.group_runs < 400  # against 199,990,000 pairs


def test_summary_says_the_cost_and_what_pairs_all_would_take() -> None:
    planner = run_checked(SimulatedFabric(names(16), {"h00009": 0.3}))
    summary = planner.summary()
    assert summary["pairs_all"] == {"rounds": 15, "group_runs": 120}
    assert (summary["rounds"], summary["group_runs"]) == (planner.rounds, planner.group_runs)
    assert [s["hosts"] for s in summary["suspects"]] == [["h00009"]]
    assert summary["suspects"][0]["evidence"][0]["purpose"] == "screen"
