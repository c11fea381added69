"""The allreduce matrix run: each variant in ranks of its own, under min(its deadline, the matrix's
budget), the next variant's ranks starting (and importing torch) while the current one measures.

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from _allreduce_config import FORCED_ENV, Config, KiB, Matrix, MiB, Variant, matrix_option
from _allreduce_ranks import Workers, start_workers, worker_config
from _allreduce_ready import describe_error
from _allreduce_rows import size_label
from _allreduce_variants import (
    absent_variant,
    matrix_winners,
    not_run,
    plan_variants,
    variant_result,
)

MATRIX_SIZES = (8, 64 * KiB, MiB, 16 * MiB, 256 * MiB)


def matrix_sizes(config: Config) -> List[int]:
    return [size for size in MATRIX_SIZES if size <= config.max_bytes] or [config.max_bytes]


def matrix_worker_config(
    config: Config, world_size: int, variant: Variant, rendezvous_file: str
) -> Dict[str, Any]:
    """A variant's ranks: a short sweep, every eager size before any graph one, started ahead of
    their turn (they wait for `go`), measuring for a few seconds of their own deadline."""
    matrix = config.matrix or matrix_option(True)
    assert matrix is not None
    cfg: Dict[str, Any] = worker_config(config, time.time(), world_size, rendezvous_file)
    cfg.update(
        sizes=matrix_sizes(config),
        order="by_mode",
        op=variant.op,
        wait_for_go=True,
        budget_s=min(3.0, 0.3 * matrix.variant_timeout_s),
        turn_timeout_s=int(matrix.variant_timeout_s) + 5,
        hard_timeout_s=int(matrix.budget_s + matrix.variant_timeout_s) + 15,
        warmup=3,
        warmup_s=0.05,
        repetitions=5,
        max_iters=20,
    )
    return cfg


class Launched(NamedTuple):
    variant: Variant
    workers: Optional[Workers]
    error: Optional[str]  # why its ranks could not even start


class Ranks(NamedTuple):
    """Where every variant's ranks run: the environment they start from, how many, the private
    folder they meet in, and what reads the probe's worker program (a variant without a source
    of its own runs it; raises OSError where it cannot be read)."""

    env: Dict[str, str]
    world: int
    scratch: str
    worker: Callable[[], str]


def launch(config: Config, variant: Variant, index: int, ranks: Ranks) -> Launched:
    """Start a variant's ranks; they import torch, then wait for their turn."""
    rendezvous = os.path.join(ranks.scratch, "rendezvous-%d" % index)
    cfg = matrix_worker_config(config, ranks.world, variant, rendezvous)
    ranks_env = dict(ranks.env)
    ranks_env.update(variant.env)
    ranks_env.update(FORCED_ENV)
    try:
        source = variant.source or ranks.worker()
        return Launched(variant, start_workers(ranks.world, ranks_env, cfg, source), None)
    except OSError as exc:
        return Launched(variant, None, "ranks could not start: " + describe_error(exc))


def run_matrix(config: Config, variants: List[Variant], ranks: Ranks) -> Dict[str, Dict[str, Any]]:
    """Each variant in turn, in ranks of its own, under min(its deadline, the matrix's budget).
    The next variant's ranks start (and import torch) while the current one measures."""
    matrix = config.matrix or matrix_option(True)
    assert matrix is not None
    deadline = time.monotonic() + matrix.budget_s
    results: Dict[str, Dict[str, Any]] = {}
    upcoming: Optional[Launched] = None
    try:
        for index, variant in enumerate(variants):
            current = upcoming or launch(config, variant, index, ranks)
            upcoming = None
            if time.monotonic() >= deadline:
                _end(current)
                results.update((v.name, not_run(v)) for v in variants[index:])
                break
            if index + 1 < len(variants):
                upcoming = launch(config, variants[index + 1], index + 1, ranks)
            results[variant.name] = run_variant(current, matrix, deadline, ranks.world)
    finally:
        _end(upcoming)
    return results


def _end(launched: Optional[Launched]) -> None:
    if launched is not None and launched.workers is not None:
        launched.workers.kill()


def run_variant(
    launched: Launched, matrix: Matrix, matrix_deadline: float, world: int
) -> Dict[str, Any]:
    begun = time.monotonic()
    workers = launched.workers
    if workers is None:
        return dict(variant_result(launched.variant, "failed", [], launched.error, 0.0, world))
    # Importing torch is not the variant's doing (and overlaps the one before): its own deadline
    # starts at its turn. Waiting for the import is bounded by the matrix's budget only.
    ready = workers.ready.wait(max(0.0, matrix_deadline - time.monotonic()))
    own_deadline = time.monotonic() + matrix.variant_timeout_s
    if ready:
        workers.go()
    try:
        status = workers.wait(min(own_deadline, matrix_deadline), until_done=True)
    finally:
        workers.kill()
    error = workers.failure() if status == "failed" else None
    if status == "deadline":
        status = "timeout" if own_deadline <= matrix_deadline else "stopped"
        error = deadline_error(status, matrix, workers.records)
    elapsed = time.monotonic() - begun
    result: Dict[str, Any] = variant_result(
        launched.variant, status, workers.records, error, elapsed, world
    )
    return result


def deadline_error(status: str, matrix: Matrix, records: List[Dict[str, Any]]) -> str:
    steps = [r for r in records if r.get("mode")]
    where = "after %s %s" % (steps[-1]["mode"], size_label(steps[-1]["bytes"])) if steps else ""
    where = where or ("before its first result" if records else "before it started")
    if status == "timeout":
        return "killed at its %gs deadline, %s" % (matrix.variant_timeout_s, where)
    return "stopped: the matrix's %gs budget ran out, %s" % (matrix.budget_s, where)


def matrix_document(config: Config, torch: Any, ranks: Ranks) -> Dict[str, Any]:
    matrix = config.matrix or matrix_option(True)
    assert matrix is not None
    started = time.monotonic()
    variants, absent = plan_variants(config, torch)
    results = run_matrix(config, variants, ranks)
    results.update((name, absent_variant(name, why)) for name, why in absent.items())
    return {
        "sizes": matrix_sizes(config),
        "budget_s": matrix.budget_s,
        "variant_timeout_s": matrix.variant_timeout_s,
        "elapsed_s": round(time.monotonic() - started, 3),
        "stopped_early": any(r["status"] in ("stopped", "not_run") for r in results.values()),
        "winners": matrix_winners(results),
        "variants": results,
    }
