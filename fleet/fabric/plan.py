"""Which hosts meet in which round, who holds which rank, and where they meet. Pure.

A round is a list of disjoint groups that run at the same time; a group is a tuple of host names
(two for a pair, all of them for the full group). Rank 0 sits on the group's master host.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.errors import UsageError

Group = tuple[str, ...]
Round = list[Group]
# Below Linux's default ephemeral range (32768-60999): a port there may be held by any outgoing
# connection or by the ranks' own gloo/NCCL sockets of a group running beside this one.
PORT_RANGE = (29500, 32767)
PAIR_MODES = (
    "ring, all, random:K, one (one round of disjoint pairs covering every host) or isolate"
    " (adaptive: screen groups, bisect the bad ones, confirm against good hosts)"
)


@dataclass(frozen=True)
class PairSpec:
    mode: str  # one | ring | all | random | isolate (fleet/fabric/isolate.py plans its rounds)
    rounds: int = 1  # random:K


def parse_pairs(text: str) -> PairSpec:
    """`--pairs` → PairSpec; a bad value is a usage error naming the choices."""
    value = text.strip().lower()
    if value in ("one", "ring", "all", "isolate"):
        return PairSpec(value)
    match = re.fullmatch(r"random:(\d{1,4})", value)
    if match and int(match.group(1)) > 0:
        return PairSpec("random", int(match.group(1)))
    raise UsageError(f"--pairs {text!r} is not a pair mode", hint=f"use {PAIR_MODES}")


def pair_rounds(hosts: Sequence[str], spec: PairSpec, seed: int = 0) -> list[Round]:
    """The pair rounds for `hosts`, each a set of disjoint pairs."""
    if len(hosts) < 2:
        return []
    if spec.mode == "all":
        return round_robin(hosts)
    if spec.mode == "ring":
        ring = [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]
        return disjoint_rounds(ring if len(hosts) > 2 else ring[:1])
    rng = random.Random(seed)
    if spec.mode == "random":
        return [covering_round(shuffled(hosts, rng), rng) for _ in range(spec.rounds)]
    return [covering_round(list(hosts), rng)]


def shuffled(hosts: Sequence[str], rng: random.Random) -> list[str]:
    order = list(hosts)
    rng.shuffle(order)
    return order


def covering_round(order: list[str], rng: random.Random) -> Round:
    """Neighbours paired up; an odd host out is paired with a random other host. That extra pair
    shares a host with another, so it goes in a round of its own when the rounds are split."""
    pairs: Round = [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]
    if len(order) % 2:
        pairs.append((order[-1], rng.choice(order[:-1])))
    return pairs


def rescue_round(orphans: Sequence[str], usable: Sequence[str], seed: int = 0) -> Round:
    """Pairs for hosts whose planned partners could not run: among themselves, and a lone one
    with another usable host."""
    rng = random.Random(seed)
    if len(orphans) >= 2:
        return covering_round(list(orphans), rng)
    return [(orphans[0], rng.choice([h for h in usable if h != orphans[0]]))]


def round_robin(hosts: Sequence[str]) -> list[Round]:
    """Every pair exactly once, n−1 rounds of disjoint pairs (the circle method)."""
    players: list[str | None] = list(hosts) + ([None] if len(hosts) % 2 else [])
    count = len(players)
    rounds: list[Round] = []
    for _ in range(count - 1):
        pairs = [(players[i], players[count - 1 - i]) for i in range(count // 2)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def disjoint_rounds(pairs: Sequence[Group]) -> list[Round]:
    """Split pairs greedily into rounds in which no host appears twice."""
    rounds: list[Round] = []
    for pair in pairs:
        for current in rounds:
            if not any(set(pair) & set(other) for other in current):
                current.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def split_overlaps(rounds: Sequence[Round]) -> list[Round]:
    """Rounds whose groups share a host are split so that each host runs one rank set at once."""
    return [part for current in rounds for part in disjoint_rounds(current)]


# ------------------------------------------------------------------------- ranks and masters


@dataclass(frozen=True)
class Placement:
    host: str
    rank: int
    device: int | None  # the CUDA device index for NCCL; None for gloo (CPU)


def place_ranks(
    group: Group, devices: Mapping[str, Sequence[int]], backend: str
) -> list[Placement]:
    """Ranks in host order, one per GPU with NCCL, one per host with gloo; rank 0 on group[0]."""
    placements: list[Placement] = []
    for host in group:
        indices: Sequence[int | None] = (devices.get(host) or [0]) if backend == "nccl" else [None]
        for index in indices:
            placements.append(Placement(host, len(placements), index))
    return placements


def with_master_first(group: Group, avoid: frozenset[str]) -> Group:
    """The group reordered so that its master (rank 0) is the first host not in `avoid` (hosts
    whose master role failed before); unchanged when all are to be avoided."""
    for index, host in enumerate(group):
        if host not in avoid:
            return (host, *group[:index], *group[index + 1 :])
    return group


def pick_port(rng: random.Random, taken: set[int]) -> int:
    """A rendezvous port not handed out yet in this run; the master host checks it is free.
    Once every port of the range was handed out (thousands of groups), they are handed out again:
    a port only needs to be free on its master when its group starts."""
    low, high = PORT_RANGE
    if len(taken) > high - low:
        taken.clear()
    while True:
        port = rng.randint(low, high)
        if port not in taken:
            taken.add(port)
            return port


def default_iters(backend: str, size: int) -> int:
    """Timed iterations per size: NCCL's calls are cheap; gloo's 16 MiB on CPU is not."""
    if backend == "nccl":
        return 20
    return max(2, min(20, (64 << 20) // max(size, 1)))


KIB, MIB = 1 << 10, 1 << 20
DEFAULT_SIZES = {
    "nccl": (8, 64 * KIB, MIB, 16 * MIB, 256 * MIB),
    "gloo": (8, 64 * KIB, MIB, 16 * MIB),
}
SIZE_UNITS = {"": 1, "B": 1, "K": KIB, "KB": KIB, "KIB": KIB, "M": MIB, "MB": MIB, "MIB": MIB}


def parse_sizes(text: str) -> tuple[int, ...]:
    """`8,64K,1M,256M` → bytes, sorted; each from 8 B to 1 GiB."""
    sizes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        match = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", part)
        unit = match.group(2).upper() if match else ""
        if not match or unit not in SIZE_UNITS:
            raise UsageError(f"--sizes: {part!r} is not a size", hint="e.g. --sizes 8,64K,1M,256M")
        size = int(match.group(1)) * SIZE_UNITS[unit]
        if not 8 <= size <= 1024 * MIB:
            raise UsageError(f"--sizes: {part} is outside 8 B … 1 GiB")
        sizes.append(size - size % 4)
    if not sizes:
        raise UsageError("--sizes is empty", hint="e.g. --sizes 8,64K,1M,256M")
    return tuple(sorted(set(sizes)))
