"""The allreduce matrix (`fleet probe --allreduce-matrix`) read back: per cohort, which variants
failed where and who wins each size; per host, whether the variant its deployment configures
(NCCL_ALGO / NCCL_PROTO in its environment) works and keeps up with the winner. Pure.

The probe (probes/allreduce.py) writes `allreduce.matrix`:
    {"sizes": [...], "winners": {mode: {"8 B": variant}}, "stopped_early": bool,
     "variants": {name: {"status", "error", "failed_at": [...], "env", "rows": [{mode, bytes,
                 latency_us, ratio, correct, …}]}}}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import human_bytes
from fleet.models import HostOutcome

FAILED = ("failed", "timeout", "partial")
# A configured variant this many times slower than the host's winner (at any size, same mode)
# gets a warning: the 2×H200 run shows NCCL's own choices within about 1.2× of each other.
SLOWER_THAN_WINNER = 1.5


def matrix_of(outcome: HostOutcome) -> Mapping[str, Any] | None:
    result = outcome.probes.get("allreduce")
    matrix = result.data.get("matrix") if result is not None else None
    return matrix if isinstance(matrix, Mapping) and matrix.get("variants") else None


# ------------------------------------------------------------------------------- per cohort


@dataclass(frozen=True)
class CohortMatrix:
    cohort: str
    hosts: int
    # (variant, where it failed) → hosts: "nccl:Tree/LL", "graph 8 B" → 3
    failures: tuple[tuple[str, str, int], ...]
    # mode → size label → ((variant, hosts), …), most hosts first
    winners: Mapping[str, Mapping[str, tuple[tuple[str, int], ...]]]
    stopped_early: int  # hosts whose matrix ran out of budget


def cohort_matrices(
    cohorts: Iterable[tuple[str, Iterable[HostOutcome]]],
) -> list[CohortMatrix]:
    """One summary per cohort that has matrix data (cohorts: name and its hosts' outcomes)."""
    found = []
    for name, outcomes in cohorts:
        matrices = [m for m in (matrix_of(o) for o in outcomes) if m is not None]
        if matrices:
            found.append(_cohort_matrix(name, matrices))
    return found


def _cohort_matrix(name: str, matrices: list[Mapping[str, Any]]) -> CohortMatrix:
    failures: Counter[tuple[str, str]] = Counter()
    winners: dict[str, dict[str, Counter[str]]] = {}
    for matrix in matrices:
        for variant, entry in sorted(matrix["variants"].items()):
            if entry.get("status") in FAILED:
                for where in entry.get("failed_at") or [entry.get("status", "?")]:
                    failures[(variant, str(where))] += 1
        for mode, by_size in (matrix.get("winners") or {}).items():
            for size, variant in by_size.items():
                winners.setdefault(mode, {}).setdefault(size, Counter())[variant] += 1
    return CohortMatrix(
        cohort=name,
        hosts=len(matrices),
        failures=tuple((v, w, n) for (v, w), n in sorted(failures.items())),
        winners={
            mode: {size: tuple(c.most_common()) for size, c in by_size.items()}
            for mode, by_size in sorted(winners.items())
        },
        stopped_early=sum(1 for m in matrices if m.get("stopped_early")),
    )


def size_order(label: str) -> int:
    """'64 KiB' → 65536, so winners print smallest size first."""
    number, _, unit = label.partition(" ")
    scale = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}.get(unit, 1)
    return int(number) * scale if number.isdigit() else 0


# ------------------------------------------------------------------ the deployment's variant


def configured_variant(
    matrix: Mapping[str, Any] | None, nccl_env: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """How the NCCL_ALGO / NCCL_PROTO the host sets fared in its matrix; None when it sets
    neither or has no matrix. `ok` is false when a matching variant failed anywhere or, at some
    size, even the best matching one is SLOWER_THAN_WINNER times the winner (same mode)."""
    if not isinstance(nccl_env, Mapping) or not isinstance(matrix, Mapping):
        return None  # not reported, or not in the shape a probe writes: nothing to judge
    wanted = {k: str(nccl_env[k]) for k in ("NCCL_ALGO", "NCCL_PROTO") if k in nccl_env}
    if not matrix or not wanted:
        return None
    variants = matrix.get("variants") or {}
    matching = sorted(n for n, v in variants.items() if _matches(v.get("env") or {}, wanted))
    configured = " ".join(f"{k}={v}" for k, v in sorted(wanted.items()))
    if not matching:
        return {"configured": configured, "variants": [], "ok": None, "summary": "not measured"}
    broken = [f"{n} ({', '.join(variants[n].get('failed_at') or [])})" for n in matching]
    broken = [b for b, n in zip(broken, matching) if variants[n]["status"] in FAILED]
    worst = _worst_ratio(variants, matching)
    slow = worst is not None and worst[0] > SLOWER_THAN_WINNER
    return {
        "configured": configured,
        "variants": matching,
        "broken": broken,
        "worst_ratio": worst[0] if worst else None,
        "worst_at": worst[1] if worst else None,
        "ok": not broken and not slow,
        "summary": _summary(broken, worst, matrix),
    }


def _matches(env: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    """NCCL reads these names case-insensitively; a list or an exclusion ('^NVLS') matches
    no single variant."""
    return bool(env) and all(str(env.get(k, "")).lower() == v.lower() for k, v in wanted.items())


def _worst_ratio(variants: Mapping[str, Any], names: list[str]) -> tuple[float, str] | None:
    """(ratio, "mode size") where even the best matching variant is furthest behind."""
    best: dict[tuple[str, int], float] = {}
    for name in names:
        for row in variants[name].get("rows") or []:
            if row.get("correct") and isinstance(row.get("ratio"), (int, float)):
                key = (row["mode"], row["bytes"])
                best[key] = min(best.get(key, row["ratio"]), row["ratio"])
    if not best:
        return None
    (mode, size), ratio = max(best.items(), key=lambda item: item[1])
    return ratio, f"{mode} {human_bytes(size)}"


def _summary(broken: list[str], worst: tuple[float, str] | None, matrix: Mapping[str, Any]) -> str:
    parts = [f"broken: {', '.join(broken)}"] if broken else []
    if worst is not None:
        mode, _, size = worst[1].partition(" ")
        winner = (matrix.get("winners") or {}).get(mode, {}).get(size, "?")
        parts.append(f"{worst[0]:g}× the winner ({winner}) at {worst[1]}")
    return "; ".join(parts) or "no correct result"
