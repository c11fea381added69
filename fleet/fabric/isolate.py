"""`--pairs isolate`: find the bad hosts and links in a few rounds of disjoint groups. Pure.

Adaptive group testing (NVIDIA's cluster-readiness screens work this way), planned one round at a
time from the results of the last (`Isolation.next_round`):
  1. screen: the full group when a baseline floor can judge it and the fleet is small, else
     disjoint groups of about √N, all in one round;
  2. bisect: a group that failed, summed wrongly or ran below the expected busbw is split in two
     halves, the halves of every such group in one round; when both halves pass, the fault lay on
     a link the cut broke (a ring neighbour across it), and those links are tried as pairs;
  3. confirm: each end of a bad pair is paired with a known-good host (one that passed a group):
     an end that is slow with a good partner is a host suspect; both ends fine means the link;
  4. re-run: a suspect is run once more (a host with another good partner, a link as itself)
     before it is named; one that passes then is noise and is cleared.
Expected busbw: the baseline floor when given, else the median of this run's reference groups
of the same size (sizes within half an octave of each other: 16 with 22) divided by 1 +
tolerance. Groups chosen for being suspect would bias their own median low, so the reference
groups are the screen's and, in a later round that runs a size with fewer than three, reference
groups of known-good hosts added to that round (they cost group runs, not rounds).

A group's ranks meet in a ring in host order, so a group tests its hosts and the links between
ring neighbours; a link between two hosts that never sit side by side is not tested (`--pairs
all` tests every link). Each round's groups are disjoint; planning a round is linear in hosts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Group = tuple[str, ...]
Edge = tuple[str, str]
FULL_GROUP_MAX_HOSTS = 16  # with a baseline floor, fleets up to this size are screened whole
SAME_SIZE_MIN = 3  # reference groups of a size before its median is trusted alone
SCREEN_MIN_HOSTS = 4  # fewer hosts: one group (nothing to compare it with but a floor)


@dataclass(frozen=True)
class IsolateSettings:
    tolerance: float = 0.25
    floor_gbps: float | None = None  # the cohort's baseline band, its low end: below is bad


@dataclass(frozen=True)
class Measured:
    """What one planned group did: ok means every rank finished with correct sums."""

    hosts: Group
    ok: bool
    busbw_gbps: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Evidence:
    """One group run as the planner judged it."""

    round: int
    hosts: Group
    purpose: str  # screen | bisect | across | confirm | rerun
    busbw_gbps: float | None
    expected_gbps: float | None
    bad: bool
    why: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "hosts": list(self.hosts),
            "purpose": self.purpose,
            "busbw_gbps": _rounded(self.busbw_gbps),
            "expected_gbps": _rounded(self.expected_gbps),
            "bad": self.bad,
            "why": self.why,
        }


@dataclass(frozen=True)
class Named:
    """A suspect the isolation names (kind host or link; pair when no good host was known to
    tell which), with every group run it took part in."""

    kind: str
    hosts: Group
    reason: str
    evidence: tuple[Evidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "hosts": list(self.hosts),
            "reason": self.reason,
            "evidence": [e.to_dict() for e in self.evidence],
        }


# ------------------------------------------------------------------------------ the tasks


@dataclass(frozen=True)
class Task:
    """One step of the search: groups run together in one round (a lone host with a known-good
    partner), then `Isolation._follow_<step>` decides what comes next."""

    step: str  # check | bisect | confirm | rerun_host | rerun_link
    groups: tuple[Group, ...]
    purpose: str
    avoid: frozenset[str] = frozenset()  # partners not to use again (the re-run wants a new one)
    origin: Group = ()  # the group this one was cut from (bisect: to find the links across)

    def hosts(self) -> set[str]:
        return {h for g in self.groups for h in g}


def ring_edges(group: Sequence[str]) -> list[Edge]:
    """The links a group's ring uses: neighbours in rank (host) order, the last with the first."""
    if len(group) < 2:
        return []
    if len(group) == 2:
        return [(group[0], group[1])]
    return [(group[i], group[(i + 1) % len(group)]) for i in range(len(group))]


def screen_groups(hosts: Sequence[str], settings: IsolateSettings) -> list[Group]:
    """Round one: the whole fleet when it is small and a floor judges it, else disjoint groups of
    about √N whose sizes differ by at most one."""
    count = len(hosts)
    whole = settings.floor_gbps is not None and count <= FULL_GROUP_MAX_HOSTS
    if count < SCREEN_MIN_HOSTS or whole:
        return [tuple(hosts)] if count >= 2 else []
    size = max(2, round(math.sqrt(count)))
    parts = max(1, count // size)
    base, extra = divmod(count, parts)
    groups, start = [], 0
    for index in range(parts):
        end = start + base + (1 if index < extra else 0)
        groups.append(tuple(hosts[start:end]))
        start = end
    return groups


def size_class(size: int) -> int:
    """Sizes compared with each other: exact up to 4 hosts, then half-octaves (16 with 22)."""
    return size if size <= 4 else 3 + round(2 * math.log2(size))


def halves(group: Group) -> tuple[Group, Group]:
    middle = len(group) // 2
    return group[:middle], group[middle:]


def edges_across(group: Group) -> list[Edge]:
    """The ring links of `group` that neither half's ring uses: the ones a cut broke."""
    kept = {frozenset(e) for half in halves(group) for e in ring_edges(half)}
    return [e for e in ring_edges(group) if frozenset(e) not in kept]


def pairs_all_cost(count: int) -> dict[str, int]:
    """What `--pairs all` takes for `count` hosts: rounds of the circle method, and pairs."""
    rounds = 0 if count < 2 else (count - 1 if count % 2 == 0 else count)
    return {"rounds": rounds, "group_runs": count * (count - 1) // 2}


def max_rounds(count: int) -> int:
    """A backstop on the search: far above what it needs (about 2·log2 N + 4 per fault level)."""
    return 4 * max(1, math.ceil(math.log2(max(count, 2)))) + 24


# ------------------------------------------------------------------------- the planner


@dataclass
class Yardstick:
    """What a group must reach: the floor when one is set, else the median busbw of unbiased
    samples of its size class (the screen's groups and reference groups of known-good hosts)."""

    settings: IsolateSettings
    by_size: dict[int, list[float]] = field(default_factory=dict)  # by size_class
    running: set[frozenset[str]] = field(default_factory=set)  # reference groups this round

    def groups(self, planned: Sequence[Group], free: list[str]) -> list[Group]:
        """Groups of `free` known-good hosts for each size this round runs that has fewer than
        SAME_SIZE_MIN reference results (none when a floor judges, or no good host is free)."""
        if self.settings.floor_gbps is not None:
            return []
        added: list[Group] = []
        for size in sorted({len(g) for g in planned}):
            for _ in range(SAME_SIZE_MIN - len(self.by_size.get(size_class(size), []))):
                if len(free) < size:
                    break
                group, free = tuple(free[:size]), free[size:]
                added.append(group)
                self.running.add(frozenset(group))
        return added

    def record(self, measured: Sequence[Measured], screened: set[frozenset[str]]) -> None:
        """The `screened` groups' results and the reference groups': samples of each size."""
        for result in measured:
            key = frozenset(result.hosts)
            sample = key in screened or key in self.running
            if result.ok and result.busbw_gbps is not None and sample:
                self.by_size.setdefault(size_class(len(key)), []).append(result.busbw_gbps)

    def expected(self, size: int) -> float | None:
        """The busbw a group of `size` hosts must reach: the floor, else the median of the
        reference groups of its size class (of all, when none ran) over 1 + tolerance."""
        if self.settings.floor_gbps is not None:
            return self.settings.floor_gbps
        values = self.by_size.get(size_class(size)) or [
            v for vs in self.by_size.values() for v in vs
        ]
        if not values:
            return None
        return float(statistics.median(values)) / (1 + self.settings.tolerance)


@dataclass
class Isolation:
    """The planner: `first_round()`, then `next_round(results)` until it returns []; `named`,
    `cleared` and `evidence` say what it found. No I/O: the caller runs the groups."""

    hosts: Sequence[str]
    settings: IsolateSettings = field(default_factory=IsolateSettings)
    rounds: int = 0
    group_runs: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    named: list[Named] = field(default_factory=list)
    cleared: list[Named] = field(default_factory=list)  # suspects the re-run did not reproduce
    good: dict[str, None] = field(default_factory=dict)  # hosts that passed a group (ordered set)
    _waiting: list[Task] = field(default_factory=list)
    _running: dict[frozenset[str], Task] = field(default_factory=dict)
    _in_round: dict[Task, list[Measured]] = field(default_factory=dict)
    yardstick: Yardstick = field(init=False)

    def __post_init__(self) -> None:
        self.yardstick = Yardstick(self.settings)

    def first_round(self) -> list[Group]:
        groups = screen_groups(list(self.hosts), self.settings)
        self._waiting = [Task("check", (g,), "screen") for g in groups]
        return self._schedule()

    def next_round(self, results: Iterable[Measured]) -> list[Group]:
        """Judge the last round's results, then plan the next; [] when the search is over."""
        measured = list(results)
        screened = {key for key, task in self._running.items() if task.purpose == "screen"}
        self.yardstick.record(measured, screened)
        for result in measured:
            self._take(result)
        for task, outcomes in self._in_round.items():
            self._waiting += self._follow(task, outcomes)
        self._in_round, self._running = {}, {}
        self.yardstick.running = set()
        if self.rounds >= max_rounds(len(self.hosts)):
            self._give_up("the search reached its round limit")
            return []
        return self._schedule()

    @property
    def done(self) -> bool:
        return not self._waiting and not self._running

    # ------------------------------------------------------------------------- scheduling

    def _schedule(self) -> list[Group]:
        """The next round: waiting tasks in order, each whole or not at all, no host twice."""
        busy: set[str] = set()
        planned: list[Group] = []
        later: list[Task] = []
        for task in self._waiting:
            groups = self._place(task, busy)
            if groups is None:
                later.append(task)
                continue
            for group in groups:
                self._running[frozenset(group)] = task
                busy.update(group)
            self._in_round[task] = []
            planned += groups
        self._waiting = later
        planned += self.yardstick.groups(planned, [h for h in self.good if h not in busy])
        if not planned and later:
            self._give_up("no known-good host was free to pair with", later)
        if planned:
            self.rounds += 1
            self.group_runs += len(planned)
        return planned

    def _place(self, task: Task, busy: set[str]) -> list[Group] | None:
        """The task's groups (with good partners where it needs them), or None if not now."""
        if task.hosts() & busy:
            return None
        lone = [g for g in task.groups if len(g) == 1]
        if not lone:
            return list(task.groups)
        partners = self._partners(len(lone), busy | task.hosts(), task.avoid)
        if partners is None:
            return None
        given = dict(zip(lone, partners))
        return [(g[0], given[g]) if g in given else g for g in task.groups]

    def _partners(self, count: int, taken: set[str], avoid: frozenset[str]) -> list[str] | None:
        chosen = _first_free(self.good, taken | avoid, count)
        if len(chosen) < count:  # a partner used before beats none at all
            chosen += _first_free(self.good, taken | set(chosen), count - len(chosen))
        return chosen if len(chosen) == count else None

    def _give_up(self, why: str, tasks: Sequence[Task] | None = None) -> None:
        """Name what is still open as undecided pairs or hosts: better said than dropped."""
        for task in tasks if tasks is not None else self._waiting:
            if task.step == "confirm":  # the two ends of one bad pair
                self._name("pair", (task.groups[0][0], task.groups[1][0]), f"undecided: {why}")
                continue
            for group in task.groups:
                kind = "host" if len(group) == 1 else "pair"
                self._name(kind, group, f"undecided: {why}")
        self._waiting = []

    # ---------------------------------------------------------------------------- judging

    def _take(self, result: Measured) -> None:
        key = frozenset(result.hosts)
        if key not in self._running:
            return  # not a group of this round: ignored
        task = self._running.pop(key)
        self._in_round[task].append(result)
        expected = self.yardstick.expected(len(result.hosts))
        why = _why_bad(result, expected)
        self.evidence.append(
            Evidence(
                self.rounds - 1,  # rounds count from 0, as the fabric section's
                tuple(result.hosts),
                task.purpose,
                result.busbw_gbps,
                expected,
                why is not None,
                why,
            )
        )
        if why is None:
            self.good.update(dict.fromkeys(result.hosts))

    def _bad(self, task: Task, outcomes: Sequence[Measured]) -> list[Group]:
        """The task's own groups (without partners) whose run was bad, or did not come back."""
        verdicts = {frozenset(m.hosts): m for m in outcomes}
        bad = []
        for own, placed in zip(task.groups, self._placed_of(task, outcomes)):
            result = verdicts.get(frozenset(placed)) if placed else None
            if (
                result is None
                or _why_bad(result, self.yardstick.expected(len(result.hosts))) is not None
            ):
                bad.append(own)
        return bad

    def _placed_of(self, task: Task, outcomes: Sequence[Measured]) -> list[Group | None]:
        """For each of the task's own groups, the group that ran for it (with its partner)."""
        placed: list[Group | None] = []
        for own in task.groups:
            match = [m.hosts for m in outcomes if set(own) <= set(m.hosts)]
            placed.append(match[0] if match else None)
        return placed

    # --------------------------------------------------------------------- what comes next

    def _follow(self, task: Task, outcomes: Sequence[Measured]) -> list[Task]:
        bad = self._bad(task, outcomes)
        step = getattr(self, f"_follow_{task.step}")
        follow: list[Task] = step(task, bad, outcomes)
        return follow

    def _follow_check(self, task: Task, bad: list[Group], _: Sequence[Measured]) -> list[Task]:
        return [self._narrow(group) for group in bad]

    def _narrow(self, group: Group) -> Task:
        """What to do with a bad group: bisect it, confirm a pair, re-run a lone host."""
        if len(group) >= 3:
            pieces = tuple(h for h in halves(group))
            singles = tuple(p for p in pieces if len(p) == 1)
            if singles:  # three hosts: a pair, and the third with a good partner
                pair = next(p for p in pieces if len(p) > 1)
                return Task("bisect", (pair, *singles), "bisect", origin=group)
            return Task("bisect", pieces, "bisect", origin=group)
        if len(group) == 2:
            return Task("confirm", ((group[0],), (group[1],)), "confirm")
        return Task("rerun_host", (group,), "rerun")

    def _follow_bisect(self, task: Task, bad: list[Group], done: Sequence[Measured]) -> list[Task]:
        if bad:
            return [self._narrow_piece(piece, done) for piece in bad]
        edges = edges_across(task.origin)
        return [Task("check", (edge,), "across") for edge in edges]

    def _narrow_piece(self, piece: Group, done: Sequence[Measured]) -> Task:
        """A lone host ran with a good partner already: that was its confirmation."""
        if len(piece) == 1:
            partner = {h for m in done if piece[0] in m.hosts for h in m.hosts} - set(piece)
            return Task("rerun_host", (piece,), "rerun", avoid=frozenset(partner))
        return self._narrow(piece)

    def _follow_confirm(self, task: Task, bad: list[Group], done: Sequence[Measured]) -> list[Task]:
        if bad:
            return [self._narrow_piece(piece, done) for piece in bad]
        link = (task.groups[0][0], task.groups[1][0])
        return [Task("rerun_link", (link,), "rerun")]

    def _follow_rerun_host(self, task: Task, bad: list[Group], _: Sequence[Measured]) -> list[Task]:
        host = task.groups[0]
        if bad:
            self._name("host", host, "slow or failing with good partners, twice")
        else:
            self._clear("host", host, "bad once, fine when re-run with a good partner: noise")
        return []

    def _follow_rerun_link(self, task: Task, bad: list[Group], _: Sequence[Measured]) -> list[Task]:
        link = task.groups[0]
        if bad:
            self._name("link", link, "bad twice; both hosts are fine with good partners")
        else:
            self._clear("link", link, "bad once, fine when re-run: noise")
        return []

    def _name(self, kind: str, hosts: Group, reason: str) -> None:
        self.named.append(Named(kind, hosts, reason))

    def _clear(self, kind: str, hosts: Group, reason: str) -> None:
        self.cleared.append(Named(kind, hosts, reason))

    # ------------------------------------------------------------------------------ report

    def suspects(self) -> list[Named]:
        """The named suspects, each with every group run it was in (a link: its runs as a pair
        or as ring neighbours, and each end's runs with good partners)."""
        return [_with_evidence(n, self.evidence) for n in self.named]

    def summary(self) -> dict[str, Any]:
        """The `isolate` part of the fabric section."""
        return {
            "rounds": self.rounds,
            "group_runs": self.group_runs,
            "hosts": len(self.hosts),
            "pairs_all": pairs_all_cost(len(self.hosts)),
            "tolerance": self.settings.tolerance,
            "floor_gbps": self.settings.floor_gbps,
            "suspects": [s.to_dict() for s in self.suspects()],
            "cleared": [_with_evidence(c, self.evidence).to_dict() for c in self.cleared],
            "links_tested": len(
                {frozenset(e) for ev in self.evidence for e in ring_edges(ev.hosts)}
            ),
        }


# ------------------------------------------------------------------------------ helpers


def _why_bad(result: Measured, expected: float | None) -> str | None:
    if not result.ok:
        return result.error or "failed"
    busbw = result.busbw_gbps
    if busbw is not None and expected is not None and busbw < expected:
        return f"{busbw:.3g} GB/s below the expected {expected:.3g} GB/s"
    return None


def _first_free(pool: Mapping[str, None], taken: set[str], count: int) -> list[str]:
    chosen: list[str] = []
    for host in pool:
        if len(chosen) == count:
            break
        if host not in taken:
            chosen.append(host)
    return chosen


def _with_evidence(named: Named, evidence: Sequence[Evidence]) -> Named:
    if named.kind == "link":
        link = frozenset(named.hosts)
        runs = [e for e in evidence if _uses(e, link) or _with_good(e, named.hosts)]
    else:
        runs = [e for e in evidence if set(named.hosts) <= set(e.hosts)]
    return Named(named.kind, named.hosts, named.reason, tuple(runs))


def _uses(evidence: Evidence, link: frozenset[str]) -> bool:
    return any(frozenset(e) == link for e in ring_edges(evidence.hosts))


def _with_good(evidence: Evidence, ends: Group) -> bool:
    return evidence.purpose in ("confirm", "rerun") and bool(set(ends) & set(evidence.hosts))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
