"""Allreduce latency and bus bandwidth across the GPUs of this host, eager and CUDA-graph mode.

With the `matrix` option it also answers "which allreduce works here, and which wins": NCCL with
each algorithm × protocol, and torch's symmetric-memory kernels, each in processes of its own with
a deadline of its own (see _allreduce_matrix.py).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict

import _worker_io as worker_io
from _allreduce_config import Config, parse_options, reported_environment, worker_environment
from _allreduce_matrix import Ranks, matrix_document
from _allreduce_ranks import Workers, default_world_size, start_workers, worker_config
from _allreduce_ready import describe_error, readiness
from _allreduce_rows import summarize

RUN_ALONE = True  # it owns every GPU of the host while it runs
TIMEOUT_S = 200  # backstop only: the probe ends itself at its budgets (30 s, +60 s for the matrix)
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): the timing
# rows are measurements (compared within cohorts, fleet/analysis/across_hosts/diff.py), never plain divergence.
# The matrix's facts are its winners per mode and size and each variant's status and the places it
# failed (`failed_at`, compared item by item); its timings and error texts are detail.
FACTS = {
    "measure": ["results"],
    "volatile": [
        "elapsed_s",
        "matrix.elapsed_s",
        "matrix.variants.*.rows",
        "matrix.variants.*.error",
        "matrix.variants.*.failures",
        "matrix.variants.*.elapsed_s",
    ],
    "sets": ["matrix.variants.*.failed_at"],
    # one rank per GPU: as many as the machine has (one GPU: the probe does not apply)
    "hardware": ["device_count", "world_size", "not_applicable"],
}
# Files the bundle carries with this probe (never written): the ranks' program first, then the
# helpers this file imports, each importable by name on the host (those they import included).
SHIPS = (
    "_allreduce_worker.py",
    "_worker_io.py",
    "_allreduce_config.py",
    "_allreduce_ready.py",
    "_allreduce_rows.py",
    "_allreduce_ranks.py",
    "_allreduce_variants.py",
    "_allreduce_matrix.py",
)
WORKER_FILE = SHIPS[0]


# The rank processes run probes/helpers/allreduce/_allreduce_worker.py: a file of its own (linted
# and type-checked), shipped beside this one in the bundle (fleet/execution/bundle.py reads SHIPS)
# and handed to the ranks as `python -c PROGRAM`, so nothing is written on the host.
def worker_source() -> str:
    """The `python -c` program of a worker: its text, with _worker_io importable."""
    return str(worker_io.worker_program(WORKER_FILE, globals().get("__shipped__")))


def plan_functions() -> Dict[str, Any]:
    """The worker's namespace without running it (its planning functions, for tests)."""
    namespace: Dict[str, Any] = {"__name__": "fleet_allreduce_worker"}
    worker = worker_io.shipped_text(globals().get("__shipped__"), WORKER_FILE)
    exec(compile(worker, WORKER_FILE, "exec"), namespace)
    return namespace


# ---------------------------------------------------------------- collect
def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    started_wall, started = time.time(), time.monotonic()
    try:
        config = parse_options(options)
    except ValueError as exc:
        return skipped("invalid options: %s" % exc, {})
    base: Dict[str, Any] = {"backend": config.backend, "dtype": config.dtype, "results": []}
    if not config.enabled:
        return skipped("allreduce disabled by options", base)
    reason, facts = readiness(config)
    base.update(facts)
    if reason:
        return skipped(reason, base)
    world_size = default_world_size(config, facts)
    env, refused = worker_environment(dict(os.environ), config.env)
    base.update(
        world_size=world_size,
        env_overrides=reported_environment(env),
        env_from_options=config.env,
        env_refused=refused,
        time_budget_s=config.time_budget_s,
        quick=config.quick,
    )
    try:
        scratch = tempfile.mkdtemp(prefix="fleet-allreduce-")  # 0700: only our ranks meet here
    except OSError as exc:  # a full or read-only temp folder
        why = "cannot create the ranks' rendezvous folder in %s: %s"
        return skipped(why % (tempfile.gettempdir(), exc.strerror or exc), base)
    try:
        result = sweep(config, started_wall, started, world_size, env, scratch, base)
        if config.matrix:
            torch = sys.modules["torch"]  # imported by readiness()
            ranks = Ranks(env, world_size, scratch, worker_source)
            base["matrix"] = matrix_document(config, torch, ranks)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


def sweep(
    config: Config,
    started_wall: float,
    started: float,
    world_size: int,
    env: Dict[str, str],
    scratch: str,
    base: Dict[str, Any],
) -> Dict[str, Any]:
    """The probe's own measurement: NCCL (or gloo) as configured, the whole size ladder."""
    cfg = worker_config(config, started_wall, world_size, os.path.join(scratch, "rendezvous"))
    try:
        workers = start_workers(world_size, env, cfg, worker_source())
    except OSError as exc:  # the worker's file missing beside a hand-run probe, or no fork
        return skipped("allreduce workers could not start: " + describe_error(exc), base)
    try:
        status = workers.wait(started + config.time_budget_s)
    finally:
        workers.kill()
    base.update(
        summarize(workers.records, world_size),
        sizes_planned=cfg["sizes"],
        timed_out=status == "deadline",
        elapsed_s=round(time.monotonic() - started, 3),
    )
    return outcome(status, workers, base)


def outcome(status: str, workers: Workers, data: Dict[str, Any]) -> Dict[str, Any]:
    if status == "failed":
        return {"ok": False, "data": data, "error": workers.failure()}
    if not data["results"]:
        why = "no result within the %gs budget" % data["time_budget_s"]
        return {"ok": False, "data": data, "error": why + " (workers killed)"}
    return {"ok": True, "data": data, "error": None}


def skipped(reason: str, data: Dict[str, Any]) -> Dict[str, Any]:
    return {"ok": False, "data": data, "error": reason}


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
