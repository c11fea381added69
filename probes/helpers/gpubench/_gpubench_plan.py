"""gpubench's plan: its options, the phases it runs, the rounds the GPU pairs run in, and each
phase's share of the time budget.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Pure, tested in
tests/probes/test_gpubench.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

MiB = 1 << 20
DTYPES = ("bfloat16", "float16", "float8_e4m3fn")
DEFAULT_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192))
QUICK_SHAPES = ((8192, 8192, 8192),)
GPU_PHASES = ("memcpy", "h2d", "d2h")  # after one matmul phase per dtype
PAIR_PHASES = ("pairs:one_way", "pairs:both_ways", "pairs:all_active")
HOST_COPY_PHASES = ("h2d", "d2h")  # the PCIe link is read while these run, where sampled
OPTION_KEYS = (
    "enabled",
    "quick",
    "time_budget_s",
    "dtypes",
    "shapes",
    "copy_mib",
    "host_copy_mib",
    "pair_copy_mib",
    "pair_rounds",
    "measure_s",
    "sample_interval_s",
    "tolerance",  # read by the controller (fleet/analysis/gpubench.py), not here
    "pair_tolerance",
)
MIN_PHASE_BUDGET_S = 0.02  # below this a figure is noise: stop early instead


class Config(NamedTuple):
    enabled: bool
    quick: bool
    time_budget_s: float
    dtypes: Tuple[str, ...]
    shapes: Tuple[Tuple[int, int, int], ...]
    copy_bytes: int
    host_copy_bytes: int
    pair_copy_bytes: int
    pair_rounds: bool  # disjoint pairs measured together (True) or one pair at a time
    measure_s: float  # target seconds of timed work per figure
    sample_interval_s: float


# ------------------------------------------------------------------------------ options
def parse_options(options: Dict[str, Any], max_budget_s: float) -> Config:
    """Validate the options; raise ValueError naming the bad value and the valid ones."""
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise ValueError("unknown option %r (known: %s)" % (unknown[0], ", ".join(OPTION_KEYS)))
    quick = bool(options.get("quick", False))
    dtypes = options.get("dtypes", list(DTYPES))
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes):
        raise ValueError("dtypes must be a list of %s, got %r" % (", ".join(DTYPES), dtypes))
    for key in ("tolerance", "pair_tolerance"):
        _number(options, key, 0.1, 0.001, 0.99)
    return Config(
        enabled=bool(options.get("enabled", True)),
        quick=quick,
        time_budget_s=_number(options, "time_budget_s", 30.0, 5.0, max_budget_s),
        dtypes=tuple(d for d in DTYPES if d in dtypes),
        shapes=_shapes(options.get("shapes"), QUICK_SHAPES if quick else DEFAULT_SHAPES),
        copy_bytes=int(_number(options, "copy_mib", 256, 1, 8192)) * MiB,
        host_copy_bytes=int(_number(options, "host_copy_mib", 128, 1, 8192)) * MiB,
        pair_copy_bytes=int(_number(options, "pair_copy_mib", 256, 1, 8192)) * MiB,
        pair_rounds=bool(options.get("pair_rounds", True)),
        measure_s=_number(options, "measure_s", 0.1 if quick else 0.25, 0.01, 10.0),
        sample_interval_s=_number(options, "sample_interval_s", 0.2, 0.05, 10.0),
    )


def _number(options: Dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError("%s must be a number from %g to %g, got %r" % (key, low, high, value))
    return float(value)


def _shapes(
    value: Any, default: Tuple[Tuple[int, int, int], ...]
) -> Tuple[Tuple[int, int, int], ...]:
    if value is None:
        return default
    good = (
        isinstance(value, list)
        and value
        and all(
            isinstance(s, list)
            and len(s) == 3
            and all(isinstance(d, int) and not isinstance(d, bool) and 16 <= d <= 65536 for d in s)
            for s in value
        )
    )
    if not good:
        raise ValueError("shapes must be a list of [m, n, k], each 16 to 65536, got %r" % (value,))
    return tuple((int(s[0]), int(s[1]), int(s[2])) for s in value)


# ------------------------------------------------------------------------------ planning
def round_robin(count: int) -> List[List[Tuple[int, int]]]:
    """Every unordered pair of `count` GPUs once, in count-1 rounds (count rounds when odd) of
    disjoint pairs (the circle method): a round's pairs share no GPU, so they run together."""
    players: List[Optional[int]] = list(range(count))
    if count % 2:
        players.append(None)  # a bye
    size = len(players)
    rounds = []
    for _ in range(size - 1):
        pairs = []
        for i in range(size // 2):
            a, b = players[i], players[size - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return [r for r in rounds if r]


def pair_schedule(count: int, together: bool) -> List[List[Tuple[int, int]]]:
    """The rounds the pairs run in: disjoint pairs together, or one pair per round."""
    rounds = round_robin(count)
    if together:
        return rounds
    return [[pair] for pairs in rounds for pair in pairs]


def plan_phases(config: Config, gpu_count: int) -> List[str]:
    phases = ["matmul:" + dtype for dtype in config.dtypes] + list(GPU_PHASES)
    if gpu_count > 1:
        phases += list(PAIR_PHASES)
    return phases


def phase_weight(phase: str, config: Config, rounds: int) -> float:
    """A phase's timed work in units of measure_s: one per figure (a matmul shape, a copy),
    with the host copies at least two (so that the sampler sees the PCIe link while they run)."""
    if phase.startswith("matmul:"):
        return float(len(config.shapes))
    if phase in HOST_COPY_PHASES:
        return 2.0
    if phase == "pairs:one_way":
        return float(min(2 * rounds, 8))
    if phase == "pairs:both_ways":
        return float(min(rounds, 6))
    return 1.0


def phase_budget(remaining_s: float, weights_left: Sequence[float], measure_s: float) -> float:
    """Seconds of timed work for the next phase: its share of what is left, at most its weight ×
    measure_s. Each phase also costs set-up (allocation, warm-up): counted as one more unit."""
    units = sum(w + 1.0 for w in weights_left)
    if units <= 0:
        return 0.0
    share = remaining_s * weights_left[0] / units
    return max(0.0, min(weights_left[0] * measure_s, share))
