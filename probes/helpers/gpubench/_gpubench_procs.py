"""gpubench's worker processes seen from the probe: each started as `python -c <worker text>`
in its own session, its records read from stdout on a thread, the end of its stderr kept, and its
whole process group killed when it is done with or given up on.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional

MARKER = "FLEET_GPUBENCH "  # starts each record line a worker prints (and is in its command line)
STDERR_TAIL_LINES = 12
MAX_ERROR_CHARS = 1500
# The NVLink-multicast policy of the lent machines, in every worker (nothing here uses it).
FORCED_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's whole process group (it leads its own session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class Worker:
    """One worker process: its records arrive on a queue; its stderr's end is kept."""

    def __init__(self, name: str, proc: subprocess.Popen) -> None:
        self.name = name
        self.proc = proc
        self.records: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.tail: Deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.hello: Dict[str, Any] = {}
        self.warnings: List[str] = []
        self.fatal: Optional[str] = None
        self.threads = [
            threading.Thread(target=self._read_records, daemon=True),
            threading.Thread(target=self._read_tail, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _read_records(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARKER):
                try:
                    record = json.loads(line[len(MARKER) :])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    self.records.put(record)
        self.records.put({"eof": True})

    def _read_tail(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.tail.append(line.rstrip()[:500])

    def next_record(self, deadline: float) -> Optional[Dict[str, Any]]:
        """The next record that is not a side note, or None at the deadline or the end."""
        while True:
            try:
                record = self.records.get(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return None
                continue
            if record.get("eof"):
                self.records.put(record)  # the end stays the end
                return None
            if "warning" in record:
                self.warnings.append(str(record["warning"]))
            elif "fatal" in record:
                self.fatal = str(record["fatal"])
            elif record.get("started"):
                self.hello = record
            else:
                return record

    def send(self, order: Optional[Dict[str, Any]]) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(order) if order else "stop") + "\n")
            self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def end(self, grace_s: float = 0.0) -> None:
        """Ask it to stop, wait `grace_s` for it to exit by itself, then kill its group."""
        if grace_s > 0 and self.alive():
            self.send(None)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        kill_group(self.proc)
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for thread in self.threads:
            thread.join(timeout=2)

    def why(self) -> str:
        """Why it failed: its fatal record, exit code and stderr's end."""
        parts = []
        if self.fatal:
            parts.append(self.fatal)
        code = self.proc.poll()
        if code not in (None, 0):
            parts.append("exited with code %s" % code)
        tail = "\n".join(self.tail)[-MAX_ERROR_CHARS:]
        if tail and not self.fatal:
            parts.append(tail)
        return "; ".join(parts) or "no answer"


def start_worker(name: str, source: str, cfg: Dict[str, Any], env: Dict[str, str]) -> Worker:
    """`python -c <source> '<cfg json>'`, leading its own session (killed as a group)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", source, json.dumps(cfg)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        start_new_session=True,
    )
    return Worker(name, proc)


def worker_environment(base: Dict[str, str]) -> Dict[str, str]:
    """The host's environment, torch's device order = nvidia-smi's (PCI bus order) unless the
    host sets one, and the multicast policy."""
    env = dict(base)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env.update(FORCED_ENV)
    return env
