"""`fleet fabric --pairs isolate`'s planner against simulated fleets (tests/fabric/network_model.py):
N hosts, k of them or of the screen's links bad (20–60% of the line rate), ±5% busbw noise.

For each N and k: rounds (mean, max), group runs (mean), how often exactly the bad hosts and
links were named, the target bound 1.5·k·log2(N/k) + 6 (2 with no fault), what `--pairs all`
costs, and the planner's own worst time for one round. Prints a Markdown table.

    python3 bench/fabric_isolate.py                 # 500 fleets at 1,024, fewer elsewhere
    python3 bench/fabric_isolate.py --quick         # a tenth of the fleets
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.fabric.isolate import IsolateSettings, Isolation, pairs_all_cost
from tests.fabric.network_model import SimulatedFabric, random_fleet

FLEETS = {16: 500, 64: 500, 256: 500, 1024: 500, 20_000: 20}
FAULTS = range(6)


def one_fleet(fabric: SimulatedFabric) -> tuple[int, int, bool, float]:
    """Rounds, group runs, exact or not, and the slowest round's planning time in seconds."""
    planner = Isolation(fabric.hosts, IsolateSettings())
    started = time.perf_counter()
    groups = planner.first_round()
    worst = time.perf_counter() - started
    while groups:
        results = [fabric.run(g) for g in groups]
        started = time.perf_counter()
        groups = planner.next_round(results)
        worst = max(worst, time.perf_counter() - started)
    named = {(n.kind, frozenset(n.hosts)) for n in planner.named}
    return planner.rounds, planner.group_runs, named == fabric.truth(), worst


def bound(count: int, faults: int) -> float:
    return 1.5 * faults * math.log2(count / faults) + 6 if faults else 2


def row(count: int, faults: int, fleets: int, seed: int) -> str:
    rng = random.Random(seed)
    rounds, runs, exact, worst = [], [], 0, 0.0
    for _ in range(fleets):
        hosts = rng.randint(0, faults)
        outcome = one_fleet(random_fleet(count, hosts, faults - hosts, rng))
        rounds.append(outcome[0])
        runs.append(outcome[1])
        exact += outcome[2]
        worst = max(worst, outcome[3])
    cost = pairs_all_cost(count)
    return (
        f"| {count:,} | {faults} | {fleets} | {sum(rounds) / fleets:.1f} / {max(rounds)} "
        f"| {bound(count, faults):.1f} | {sum(runs) / fleets:.0f} | {100 * exact / fleets:.1f}% "
        f"| {cost['rounds']:,} / {cost['group_runs']:,} | {1000 * worst:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the fleets")
    parser.add_argument("--sizes", default=",".join(map(str, FLEETS)), help="N values")
    args = parser.parse_args()
    print(
        "| N | k | fleets | rounds mean / max | bound | group runs | exact | "
        "`--pairs all` rounds / pairs | planning, worst round (ms) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for count in (int(n) for n in args.sizes.split(",")):
        fleets = max(2, FLEETS.get(count, 100) // (10 if args.quick else 1))
        for faults in FAULTS:
            print(row(count, faults, fleets, seed=count * 10 + faults), flush=True)


if __name__ == "__main__":
    main()
