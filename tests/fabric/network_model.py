"""A simulated fabric for the isolation planner (tests and bench/fabric_isolate.py).

A group's ranks meet in a ring in host order (gloo's and NCCL's ring allreduce), so its busbw is
the line rate times the worst factor on that ring: each host's (a slow host slows every link it
is on) and each link's between ring neighbours, times ±`noise` uniform noise. A bad host or link
runs at 20–60% of the line rate. Bad links are drawn among the links the planner's screen round
puts side by side: a link no group uses cannot be seen by any adaptive plan (`--pairs all` is
the tool for those), so drawing it elsewhere would measure nothing about the planner.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleet.fabric.isolate import Group, IsolateSettings, Isolation, Measured, ring_edges
from fleet.fabric.isolate import screen_groups as screen

LINE_RATE_GBPS = 100.0


@dataclass
class SimulatedFabric:
    hosts: list[str]
    bad_hosts: dict[str, float] = field(default_factory=dict)  # host → factor of the line rate
    bad_links: dict[frozenset[str], float] = field(default_factory=dict)
    noise: float = 0.05
    rng: random.Random = field(default_factory=random.Random)

    def run(self, group: Group) -> Measured:
        factors = [self.bad_hosts.get(h, 1.0) for h in group]
        factors += [self.bad_links.get(frozenset(e), 1.0) for e in ring_edges(group)]
        jitter = self.rng.uniform(1 - self.noise, 1 + self.noise)
        return Measured(group, True, LINE_RATE_GBPS * min(factors) * jitter)

    def truth(self) -> set[tuple[str, frozenset[str]]]:
        return {("host", frozenset([h])) for h in self.bad_hosts} | {
            ("link", link) for link in self.bad_links
        }


def names(count: int) -> list[str]:
    return [f"h{i:05d}" for i in range(count)]


def random_fleet(
    count: int, bad_hosts: int, bad_links: int, rng: random.Random, noise: float = 0.05
) -> SimulatedFabric:
    """`bad_hosts` slow hosts anywhere, `bad_links` slow links among the screen's ring links
    between hosts that are not slow themselves (a slow link on a slow host is that host)."""
    hosts = names(count)
    slow = rng.sample(hosts, bad_hosts)
    fabric = SimulatedFabric(hosts, {h: rng.uniform(0.2, 0.6) for h in slow}, noise=noise, rng=rng)
    links = [
        frozenset(e)
        for g in screen(hosts, IsolateSettings())
        for e in ring_edges(g)
        if not set(e) & set(slow)
    ]
    for link in _spread(links, bad_links, rng):
        fabric.bad_links[link] = rng.uniform(0.2, 0.6)
    return fabric


def _spread(
    links: Sequence[frozenset[str]], count: int, rng: random.Random
) -> list[frozenset[str]]:
    """`count` links sharing no host (two bad links on one host would read as that host)."""
    chosen: list[frozenset[str]] = []
    for link in rng.sample(list(links), len(links)):
        if len(chosen) == count:
            break
        if not any(link & other for other in chosen):
            chosen.append(link)
    return chosen


@dataclass(frozen=True)
class Outcome:
    rounds: int
    group_runs: int
    exact: bool
    named: set[tuple[str, frozenset[str]]]


def isolate(fabric: SimulatedFabric, settings: IsolateSettings | None = None) -> Outcome:
    """The planner against the model, round after round, until it stops."""
    planner = Isolation(fabric.hosts, settings or IsolateSettings())
    groups = planner.first_round()
    while groups:
        groups = planner.next_round([fabric.run(g) for g in groups])
    named = {(n.kind, frozenset(n.hosts)) for n in planner.named}
    return Outcome(planner.rounds, planner.group_runs, named == fabric.truth(), named)
