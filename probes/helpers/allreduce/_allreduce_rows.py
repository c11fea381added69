"""The allreduce probe's numbers: nccl-tests' bandwidth definitions, the size ladder, a rank's
records made result rows, and the sweep's summary.

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from _allreduce_config import KiB, MiB


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth: bytes reduced per second, in GB/s (1e9 bytes/s)."""
    return nbytes / seconds / 1e9


def busbw_gbps(algbw: float, world_size: int) -> float:
    """Bus bandwidth of a ring allreduce: each byte crosses 2(n-1)/n links."""
    return algbw * 2 * (world_size - 1) / world_size


def size_ladder(max_bytes: int, quick: bool, min_bytes: int = 8) -> List[int]:
    """8 B, 16 B, … doubling (×8 with `quick`) up to `max_bytes`, which is always the last size."""
    factor = 8 if quick else 2
    sizes = []
    size = min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    sizes.append(max_bytes)
    return sizes


def significant(value: float, digits: int = 6) -> float:
    """Round to significant digits: 8 B over gloo is 1e-4 GB/s, which 3 decimals would zero."""
    return float("%.*g" % (digits, value))


def result_row(record: Dict[str, Any], world_size: int) -> Optional[Dict[str, Any]]:
    """A worker's `{"mode", "bytes", "seconds", "correct"}` → a result row, or None if malformed.

    `seconds` is the median of the repetitions; latency_us_min/max are their fastest and slowest."""
    if record.get("mode") not in ("eager", "graph"):
        return None
    nbytes, seconds = record.get("bytes"), record.get("seconds")
    if not isinstance(nbytes, int) or not isinstance(seconds, (int, float)) or seconds <= 0:
        return None
    algbw = algbw_gbps(nbytes, seconds)
    return {
        "mode": record["mode"],
        "bytes": nbytes,
        "latency_us": significant(seconds * 1e6),
        "latency_us_min": _microseconds(record.get("seconds_min"), seconds),
        "latency_us_max": _microseconds(record.get("seconds_max"), seconds),
        "algbw_gbps": significant(algbw),
        "busbw_gbps": significant(busbw_gbps(algbw, world_size)),
        "correct": record.get("correct") is True,
        "iterations": record.get("iterations"),
        "repetitions": record.get("repetitions"),
    }


def _microseconds(value: Any, default: float) -> float:
    seconds = value if isinstance(value, (int, float)) and value > 0 else default
    return significant(seconds * 1e6)


def size_label(size: Any) -> str:
    """8 B, 64 KiB, 1 MiB: the keys of the winners (the same words as the controller's)."""
    if not isinstance(size, int):
        return str(size)
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def summarize(records: List[Dict[str, Any]], world_size: int) -> Dict[str, Any]:
    rows = [row for row in (result_row(r, world_size) for r in records) if row is not None]
    started = next((r for r in records if r.get("started")), {})
    done = next((r for r in records if r.get("done")), {})
    errors = [r["error"] for r in records if r.get("mode") == "graph" and r.get("error")]
    return {
        "nccl_version": started.get("nccl_version"),
        "torch_version": started.get("torch_version"),
        "device_name": started.get("device_name"),
        "results": rows,
        "all_correct": bool(rows) and all(row["correct"] for row in rows),
        "graph_error": errors[0] if errors else None,
        "step_errors": [
            failure_of(r) for r in records if r.get("mode") == "eager" and "error" in r
        ],
        "completed": bool(done),
        "stopped_early": bool(done.get("stopped_early")) or not done,
    }


def failure_of(record: Dict[str, Any]) -> Dict[str, Any]:
    return {"mode": record["mode"], "bytes": record.get("bytes"), "error": record["error"]}
