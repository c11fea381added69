"""Per-GPU speed and every GPU pair's copy rate, all GPUs at once, with PCIe and clocks sampled under load (opt-in: --gpubench)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import _gpubench_plan as plan
import _worker_io as worker_io
from _gpubench_procs import MARKER, MAX_ERROR_CHARS, Worker, start_worker, worker_environment
from _gpubench_results import add_contention, gpu_entry, match_rows, memory_used, pair_entries
from _gpubench_sampler import Sampler, load_summary
from _pcie import local_cpus

RUN_ALONE = True  # it owns every GPU of the host while it runs
TIMEOUT_S = 200  # backstop only: the probe ends itself at its budget (30 s by default)
# How the controller compares this probe's fields across hosts (fleet/analysis/facts.py). The
# figures are measurements (compared within cohorts; scored per host by fleet/analysis/gpubench.py),
# the readings under load and the timings detail; what the machine is stays a fact.
FACTS = {
    "identity": ["gpus[*].uuid", "gpus[*].pci_bus_id"],
    "measure": ["gpus[*].tflops", "gpus[*].gbps", "pairs[*].gbps"],
    "volatile": [
        "elapsed_s",
        "gpus[*].matmul",
        "gpus[*].copies",
        "gpus[*].load",
        "gpus[*].error",
        "gpus[*].warning",
        "phases",
        "stopped_early",
        "stopped",
        "sampler",
        "cleanup",
    ],
    "hardware": [
        "device_count",
        "gpus",
        "gpus[*].index",
        "gpus[*].cuda_index",
        "gpus[*].name",
        "gpus[*].capability",
        "gpus[*].memory_gib",
        "pairs",
        "pairs[*].src",
        "pairs[*].dst",
        "pairs[*].peer_access",
        "pairs_note",
    ],
}
# Files the bundle carries with this probe (never written). The worker comes first: it travels as
# text and runs as `python -c <its text>` in a child process, where the runner's shipped modules
# are not importable, so it imports no helper (it is self-contained on purpose). The others are
# the helpers this probe imports by module name (and _host_io.py, which _pcie imports).
SHIPS = (
    "_gpubench_worker.py",
    "_worker_io.py",
    "_gpubench_plan.py",
    "_gpubench_procs.py",
    "_gpubench_results.py",
    "_gpubench_sampler.py",
    "_nvidia_smi.py",
    "_pcie.py",
    "_host_io.py",
)
WORKER_FILE = SHIPS[0]
PRELOAD = ("torch",)  # imported once by the runner's fork server (probes/runner/_host_runner.py)

MAX_BUDGET_S = TIMEOUT_S - 20  # leave the runner's backstop room to see the probe end itself


def parse_options(options: Dict[str, Any]) -> plan.Config:
    """Validate the options; raise ValueError naming the bad value and the valid ones."""
    return plan.parse_options(options, MAX_BUDGET_S)


# ------------------------------------------------------------------------------ the workers
def worker_source() -> str:
    """The `python -c` program of a worker: its text, with _worker_io importable."""
    return str(worker_io.worker_program(WORKER_FILE, globals().get("__shipped__")))


def plan_functions() -> Dict[str, Any]:
    """The worker's namespace without running it (its pure functions, for tests)."""
    namespace: Dict[str, Any] = {"__name__": "fleet_gpubench_worker"}
    worker = worker_io.shipped_text(globals().get("__shipped__"), WORKER_FILE)
    exec(compile(worker, WORKER_FILE, "exec"), namespace)
    return namespace


# ------------------------------------------------------------------------------ the run
class Bench:
    """The benchmark's course: GPU workers first (every GPU at once), then the pairs worker,
    each phase given its share of the budget; at the deadline everything is killed."""

    def __init__(self, config: plan.Config, count: int, smi: Optional[str], started: float) -> None:
        self.config = config
        self.count = count
        self.started = started
        self.deadline = started + config.time_budget_s - 2.0  # room to kill and read back
        self.sampler = Sampler(smi, config.sample_interval_s)
        self.phases = plan.plan_phases(config, count)
        self.rounds = plan.pair_schedule(count, config.pair_rounds) if count > 1 else []
        self.status: Dict[str, Dict[str, Any]] = {p: {"status": "not_run"} for p in self.phases}
        self.windows: List[Tuple[str, float, float]] = []
        self.gpu_results: Dict[int, Dict[str, Dict[str, Any]]] = {i: {} for i in range(count)}
        self.gpu_errors: Dict[int, str] = {}
        self.pair_results: Dict[str, Dict[str, Any]] = {}
        self.stopped: Optional[str] = None
        self.workers: List[Worker] = []
        self.failed: List[str] = []  # workers given up on
        self.pairs_error: Optional[str] = None

    def worker_config(
        self, role: str, phases: List[str], cpus: Optional[List[int]]
    ) -> Dict[str, Any]:
        config = self.config
        return {
            "role": role,
            "phases": phases,
            "marker": MARKER,
            "parent_pid": os.getpid(),
            "hard_timeout_s": int(config.time_budget_s) + 15,
            "shapes": [list(s) for s in config.shapes],
            "copy_bytes": config.copy_bytes,
            "host_copy_bytes": config.host_copy_bytes,
            "pair_copy_bytes": config.pair_copy_bytes,
            "devices": list(range(self.count)),
            "rounds": [[list(p) for p in r] for r in self.rounds],
            "warmup_s": 0.15 if config.quick else 0.3,
            "repetitions": 3 if config.quick else 5,
            "cpus": cpus,
        }

    def weights(self, phases: Sequence[str]) -> List[float]:
        return [plan.phase_weight(p, self.config, len(self.rounds)) for p in phases]

    def run(self, idle_rows: Optional[List[Dict[str, Any]]], env: Dict[str, str]) -> None:
        gpu_phases = [p for p in self.phases if not p.startswith("pairs:")]
        pair_phases = [p for p in self.phases if p.startswith("pairs:")]
        by_index = {row["index"]: row for row in idle_rows or []}
        gpu_workers = []
        for index in range(self.count):
            cpus = local_cpus((by_index.get(index) or {}).get("pci_bus_id"))
            cfg = dict(self.worker_config("gpu", gpu_phases, cpus), device=index)
            gpu_workers.append(start_worker("GPU%d" % index, worker_source(), cfg, env))
        self.workers += gpu_workers
        pairs = None
        if pair_phases:  # it imports torch while the GPUs measure, then waits for its turn
            cfg = self.worker_config("pairs", pair_phases, None)
            pairs = start_worker("pairs", worker_source(), cfg, env)
            self.workers.append(pairs)
        self.sampler.start()
        self.run_phases(gpu_phases, gpu_workers, self.phases)
        for worker in gpu_workers:  # their memory is free before the peer copies start
            worker.end(grace_s=3.0)
        if pairs is not None:
            self.run_phases(pair_phases, [pairs], pair_phases)

    def run_phases(self, phases: List[str], workers: List[Worker], planned: List[str]) -> None:
        for position, phase in enumerate(phases):
            ready = self._ready_workers(workers, phase)
            if not ready:
                return
            left = planned[planned.index(phase) :]
            budget = plan.phase_budget(
                self.deadline - time.monotonic(), self.weights(left), self.config.measure_s
            )
            if budget < plan.MIN_PHASE_BUDGET_S:
                self._stop("the %gs budget ran out before %s" % (self.config.time_budget_s, phase))
                return
            self._measure(phase, budget, ready, len(workers))
            if time.monotonic() >= self.deadline and position + 1 < len(phases):
                self.status[phase]["status"] = "stopped"
                self._stop("the %gs budget ran out during %s" % (self.config.time_budget_s, phase))
                return

    def _ready_workers(self, workers: List[Worker], phase: str) -> List[Worker]:
        """The workers that said they are ready for `phase`; those that did not are given up
        on. None when the run is over (stopped, or no worker left)."""
        live = [w for w in workers if w.alive() and w.name not in self.failed]
        if self.stopped or not live:
            return []
        ready = [w for w in live if self._wait_ready(w, phase)]
        for worker in live:
            if worker not in ready:
                self._fail(worker, "not ready for %s: %s" % (phase, worker.why()))
        return [] if self.stopped else ready

    def _measure(self, phase: str, budget: float, ready: List[Worker], planned: int) -> None:
        """One phase on the ready workers, in about `budget` seconds; its window and status."""
        began = time.monotonic()
        for worker in ready:
            worker.send({"budget_s": budget})
        phase_deadline = min(self.deadline, began + 3 * budget + 15)
        answered = 0
        for worker in ready:
            record = worker.next_record(phase_deadline)
            if record is None or record.get("phase") != phase:
                why = "no result within its deadline" if worker.alive() else worker.why()
                self._fail(worker, "%s: %s" % (phase, why))
                continue
            answered += 1
            self._keep(worker, phase, record)
        ended = time.monotonic()
        self.windows.append((phase, began, ended))
        self.status[phase] = {
            "status": "ok"
            if answered == len(ready) == planned
            else ("partial" if answered else "failed"),
            "budget_s": round(budget, 3),
            "elapsed_s": round(ended - began, 3),
        }

    def _wait_ready(self, worker: Worker, phase: str) -> bool:
        record = worker.next_record(self.deadline)
        if record is None and time.monotonic() >= self.deadline:
            self._stop(
                "the %gs budget ran out before %s (workers not ready)"
                % (self.config.time_budget_s, phase)
            )
        return record is not None and record.get("ready") == phase

    def _keep(self, worker: Worker, phase: str, record: Dict[str, Any]) -> None:
        if worker.name == "pairs":
            self.pair_results[phase] = record
            return
        index = int(worker.name[3:])
        self.gpu_results[index][phase] = record

    def _fail(self, worker: Worker, why: str) -> None:
        self.failed.append(worker.name)
        if worker.name == "pairs":
            self.pairs_error = why
        else:
            self.gpu_errors[int(worker.name[3:])] = why[:MAX_ERROR_CHARS]
        worker.end()

    def _stop(self, why: str) -> None:
        if not self.stopped:
            self.stopped = why
        for worker in self.workers:
            worker.end()

    def end(self) -> List[int]:
        """Kill whatever still runs; the pids of workers that are still there after (none)."""
        for worker in self.workers:
            worker.end()
        self.sampler.stop()
        return [w.proc.pid for w in self.workers if w.proc.poll() is None]


def assemble(bench: Bench, after_rows: Optional[List[Dict[str, Any]]]) -> Dict[str, Any]:
    """The probe's data from what the workers and the sampler said."""
    rows = after_rows or (bench.sampler.samples[0][1] if bench.sampler.samples else [])
    identities = {}
    for worker in bench.workers:
        if worker.name.startswith("GPU") and worker.hello.get("identity"):
            identities[int(worker.name[3:])] = worker.hello["identity"]
    for index in range(bench.count):
        identities.setdefault(index, {"cuda_index": index})
    matched = match_rows(identities, rows)
    gpus = []
    for index in range(bench.count):
        row = matched.get(index)
        entry = gpu_entry(index, identities[index], row, bench.gpu_results[index])
        entry["load"] = load_summary(
            bench.sampler.samples, bench.windows, row["index"] if row else None
        )
        entry["error"] = bench.gpu_errors.get(index) or _phase_errors(bench.gpu_results[index])
        own = next((w for w in bench.workers if w.name == "GPU%d" % index), None)
        entry["warning"] = "; ".join(own.warnings) if own and own.warnings else None
        gpus.append(entry)
    index_of = {g["cuda_index"]: g["index"] for g in gpus}
    pairs_worker = next((w for w in bench.workers if w.name == "pairs"), None)
    access = (pairs_worker.hello.get("peer_access") if pairs_worker else None) or {}
    pairs = (
        pair_entries(range(bench.count), index_of, access, bench.pair_results)
        if bench.count > 1
        else []
    )
    add_contention(gpus, pairs)
    gpus.sort(key=lambda g: (g["index"], g["cuda_index"]))
    note = None
    if bench.count == 1:
        note = "1 GPU: no GPU pairs to measure"
    elif bench.pairs_error:
        note = "pairs: " + bench.pairs_error
    return {
        "device_count": bench.count,
        "gpus": gpus,
        "pairs": pairs,
        "pairs_note": note,
        "phases": bench.status,
        "stopped_early": bench.stopped is not None,
        "stopped": bench.stopped,
        "sampler": bench.sampler.record(),
    }


def _phase_errors(results: Dict[str, Dict[str, Any]]) -> Optional[str]:
    errors = [
        "%s: %s" % (phase, r["error"]) for phase, r in sorted(results.items()) if r.get("error")
    ]
    return "; ".join(errors)[:MAX_ERROR_CHARS] or None


# ------------------------------------------------------------------------------ can it run here?
def describe_error(exc: BaseException) -> str:
    return ("%s: %s" % (type(exc).__name__, exc))[:500]


def readiness() -> Tuple[Optional[str], Dict[str, Any]]:
    """(why the benchmark cannot run here or None, facts learnt); runs no CUDA work."""
    try:
        import torch
    except (Exception, SystemExit) as exc:
        return "torch not importable: " + describe_error(exc), {}
    facts: Dict[str, Any] = {"torch_version": str(getattr(torch, "__version__", None))}
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:
        return "CUDA query failed: " + describe_error(exc), facts
    facts["device_count"] = count
    if not available or count < 1:
        return "no GPU: CUDA not available to torch %s" % facts["torch_version"], facts
    return None, facts


def skipped(reason: str, data: Dict[str, Any]) -> Dict[str, Any]:
    return {"ok": False, "data": data, "error": reason}


def planned(bench: Bench) -> Dict[str, Any]:
    """What the run set out to measure, as the options and the GPU count made it."""
    config = bench.config
    return {
        "phases": bench.phases,
        "dtypes": list(config.dtypes),
        "shapes": ["x".join(str(d) for d in s) for s in config.shapes],
        "copy_mib": config.copy_bytes // plan.MiB,
        "host_copy_mib": config.host_copy_bytes // plan.MiB,
        "pair_copy_mib": config.pair_copy_bytes // plan.MiB,
        "pair_rounds": [[list(p) for p in r] for r in bench.rounds],
    }


def measured(data: Dict[str, Any]) -> Dict[str, Any]:
    """The result: ok when at least one figure was measured, else why none was."""
    if not any(g["tflops"] or g["gbps"] for g in data["gpus"]):
        errors = [g["error"] for g in data["gpus"] if g.get("error")]
        why = data["stopped"] or (errors[0] if errors else "no figure measured")
        return {"ok": False, "data": data, "error": "no figure measured: %s" % why}
    return {"ok": True, "data": data, "error": None}


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    started = time.monotonic()
    try:
        config = parse_options(options)
    except ValueError as exc:
        return skipped("invalid options: %s" % exc, {})
    if not config.enabled:
        return skipped("gpubench disabled by options", {})
    reason, facts = readiness()
    base: Dict[str, Any] = dict(facts, time_budget_s=config.time_budget_s, quick=config.quick)
    if reason:
        return skipped(reason, base)
    bench = Bench(config, int(facts["device_count"]), shutil.which("nvidia-smi"), started)
    base["planned"] = planned(bench)
    before = bench.sampler.query()  # identities, link maxima and memory in use before the load
    try:
        bench.run(before, worker_environment(dict(os.environ)))
    except OSError as exc:  # no fork, or the worker file missing beside a hand-run probe
        bench.end()
        return skipped("gpubench workers could not start: " + describe_error(exc), base)
    except BaseException:
        bench.end()  # no worker outlives the probe, whatever broke it
        raise
    left = bench.end()
    after = bench.sampler.query() if bench.sampler.executable else None
    base.update(assemble(bench, after or before))
    base["cleanup"] = {
        "workers_left": left,
        "memory_used_mib_before": memory_used(before),
        "memory_used_mib_after": memory_used(after),
    }
    base["elapsed_s"] = round(time.monotonic() - started, 3)
    return measured(base)


if __name__ == "__main__":
    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
