"""`--pairs isolate` over the transports: the planner (isolate.py) asks for a round of disjoint
groups, FabricRounds runs them as any round (pairs or bigger groups alike: SSH, local, or one srun
step per group), and their results plan the next round, until the planner is done or Ctrl-C."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fleet.fabric.blame import Suspect
from fleet.fabric.isolate import IsolateSettings, Isolation, Measured, Named
from fleet.fabric.results import GroupResult

# Runs one round of groups (its index, the groups) and gives their results: FabricRounds.run_round
# with the hosts it found, handed in so that this module need not import the runner back.
RoundRunner = Callable[[int, Sequence[tuple[str, ...]]], Awaitable[Sequence[GroupResult]]]


async def isolate_rounds(
    run_round: RoundRunner,
    interrupted: Callable[[], bool],
    usable: Sequence[str],
    settings: IsolateSettings,
) -> tuple[list[GroupResult], Isolation]:
    """Every group run, in order, and the planner that chose them (its suspects and summary)."""
    planner = Isolation(list(usable), settings)
    runs: list[GroupResult] = []
    groups = planner.first_round()
    while groups:
        results = await run_round(planner.rounds - 1, groups)
        runs += results
        if interrupted():
            break
        groups = planner.next_round([measured(r) for r in results])
    return runs, planner


def measured(result: GroupResult) -> Measured:
    """What the planner needs of a group: ok (every rank finished, sums right) and busbw."""
    if result.status == "ok" and result.correct is False:
        return Measured(result.hosts, False, result.busbw_gbps, "wrong sums")
    error = None if result.status == "ok" else f"{result.status}: {result.error}"
    return Measured(result.hosts, result.status == "ok", result.busbw_gbps, error)


def isolate_suspects(planner: Isolation, tolerance: float) -> list[Suspect]:
    """The planner's named suspects as the fabric section's suspects: the reason says the last
    bad run against what was expected, the factor how many times slower than the fleet."""
    return [_suspect(named, tolerance) for named in planner.suspects()]


def _suspect(named: Named, tolerance: float) -> Suspect:
    bad = [e for e in named.evidence if e.bad]
    last = bad[-1] if bad else None
    factor = None
    if last and last.busbw_gbps is not None and last.expected_gbps is not None:
        typical = last.expected_gbps * (1 + tolerance)
        factor = typical / last.busbw_gbps if last.busbw_gbps > 0 else math.inf
    seen = f"; bad in {len(bad)} of {len(named.evidence)} group runs" if named.evidence else ""
    last_text = f", last: {last.why} (round {last.round})" if last and last.why else ""
    return Suspect(named.kind, named.hosts, named.reason + seen + last_text, factor)


def suspect_error(name: str, named: Sequence[Mapping[str, Any]]) -> str | None:
    """A host's error in an isolate run, as the pair modes give one: a named suspect whose groups
    failed or summed wrongly. One only slow is a suspect in the data (`fleet check` fails it), and
    a host whose screen group failed but that was cleared later has no error."""
    for suspect in named:
        broken = [
            e
            for e in suspect["evidence"]
            if e["bad"] and (e["busbw_gbps"] is None or e["why"] == "wrong sums")
        ]
        if name in suspect["hosts"] and broken:
            others = [h for h in suspect["hosts"] if h != name]
            kind = suspect["kind"] + (f" with {', '.join(others)}" if others else "")
            return f"suspect {kind}: {broken[-1]['why']}"
    return None
