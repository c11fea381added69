"""The allreduce probe's rank processes: one `python -c WORKER CONFIG` per rank, each in a process
group of its own, supervised (their records read, stderr tails kept, killed whole at a deadline).

Not a probe (the leading underscore): shipped with the allreduce probe (its `SHIPS`), stdlib
only, Python 3.8, importable by name on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional

from _allreduce_config import Config
from _allreduce_rows import size_ladder

MARKER = "FLEET_ALLREDUCE "  # rank 0's result lines; NCCL_DEBUG output shares that stdout
STDERR_TAIL_LINES = 12
MAX_ERROR_CHARS = 1500
EAGER_REPETITIONS = 7  # timed samples per size: the median is reported, with min and max


def rank_environment(env: Dict[str, str], rank: int, world_size: int) -> Dict[str, str]:
    ranked = dict(env)
    ranked.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    return ranked


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's whole process group (it leads its own session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class Workers:
    """The rank processes, each in its own process group so that a kill takes its children too."""

    def __init__(self, procs: List[subprocess.Popen]) -> None:
        self.procs = procs
        self.failed_rank: Optional[int] = None
        self.records: List[Dict[str, Any]] = []
        self.done = threading.Event()  # rank 0 reported its summary: nothing more to wait for
        self.ready = threading.Event()  # rank 0 imported torch and waits for its turn
        self.tails: List[Deque[str]] = [deque(maxlen=STDERR_TAIL_LINES) for _ in procs]
        self.threads = [threading.Thread(target=self._read_records, daemon=True)]
        self.threads += [
            threading.Thread(target=self._read_tail, args=(i,), daemon=True)
            for i in range(len(procs))
        ]
        for thread in self.threads:
            thread.start()

    def _read_records(self) -> None:
        stream = self.procs[0].stdout
        assert stream is not None
        for line in stream:
            if line.startswith(MARKER):
                try:
                    record = json.loads(line[len(MARKER) :])
                except ValueError:
                    continue
                self.records.append(record)
                if isinstance(record, dict) and record.get("done"):
                    self.done.set()
                if isinstance(record, dict) and record.get("ready"):
                    self.ready.set()

    def _read_tail(self, index: int) -> None:
        stream = self.procs[index].stderr
        assert stream is not None
        for line in stream:
            self.tails[index].append(line.rstrip()[:500])

    def go(self) -> None:
        """Start ranks that wait for their turn (Variant processes started ahead of it)."""
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()

    def wait(self, deadline: float, until_done: bool = False) -> str:
        """ "finished", "failed" (a rank exited non-zero: the others would hang) or "deadline".

        With `until_done`, rank 0's summary is enough: the ranks' teardown is not waited for."""
        while True:
            codes = [p.poll() for p in self.procs]
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                self.failed_rank = failed[0]  # before kill() gives every rank a non-zero code
                return "failed"
            if all(code == 0 for code in codes) or (until_done and self.done.is_set()):
                return "finished"
            if time.monotonic() >= deadline:
                return "deadline"
            time.sleep(0.05)

    def kill(self) -> None:
        for proc in self.procs:
            kill_group(proc)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        for thread in self.threads:
            thread.join(timeout=2)

    def failure(self) -> str:
        """The first failed rank's exit code and the end of its stderr."""
        if self.failed_rank is None:
            return "workers failed"
        rank = self.failed_rank
        tail = "\n".join(self.tails[rank])[-MAX_ERROR_CHARS:]
        return "rank %d exited with code %s: %s" % (rank, self.procs[rank].returncode, tail)


def start_workers(
    world_size: int, env: Dict[str, str], cfg: Dict[str, Any], source: str
) -> Workers:
    """One `python -c SOURCE CONFIG` per rank; with cfg["wait_for_go"] their stdin is a pipe.
    SOURCE is the ranks' program: the probe's shipped _allreduce_worker.py (a text the probe alone
    holds, as `__shipped__`) or a variant's own."""
    procs = []
    try:
        for rank in range(world_size):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", source, json.dumps(cfg)],
                    env=rank_environment(env, rank, world_size),
                    stdin=subprocess.PIPE if cfg.get("wait_for_go") else subprocess.DEVNULL,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    universal_newlines=True,
                    start_new_session=True,
                )
            )
    except BaseException:
        for proc in procs:  # a rank that could not start: the others would wait for it forever
            kill_group(proc)
        raise
    return Workers(procs)


def worker_config(
    config: Config, started_wall: float, world_size: int, rendezvous_file: str
) -> Dict[str, Any]:
    reserve_s = min(4.0, config.time_budget_s * 0.15)  # for teardown and the last size's overrun
    return {
        "backend": config.backend,
        "dtype": config.dtype,
        "sizes": size_ladder(config.max_bytes, config.quick),
        "graph": config.backend == "nccl",  # CUDA graphs exist only for NCCL on CUDA
        "warmup": 2 if config.quick else 5,
        "warmup_s": 0.1 if config.quick else 0.3,  # once, before the first size
        "repetitions": EAGER_REPETITIONS,
        "order": "by_size",
        "op": "dist",
        "min_iters": 2,
        "max_iters": 20 if config.quick else 50,
        "deadline": started_wall + config.time_budget_s - reserve_s,
        "hard_timeout_s": int(config.time_budget_s) + 10,
        "parent_pid": os.getpid(),
        "marker": MARKER,
        "world_size": world_size,
        "rendezvous_file": rendezvous_file,
    }


def default_world_size(config: Config, facts: Dict[str, Any]) -> int:
    if config.world_size is not None:
        return int(config.world_size)
    return 2 if config.backend == "gloo" else int(facts.get("device_count", 0))
