"""gpubench's readings under load: nvidia-smi sampled in a thread while the workers run, and one
GPU's summary of the samples taken inside the phases (PCIe link, clock-event reasons, clocks,
temperature, power).

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). load_summary is pure, tested in
tests/probes/test_gpubench.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from _gpubench_plan import HOST_COPY_PHASES
from _nvidia_smi import (
    HW_SLOWDOWN_REASONS,
    LEGACY_REASONS_FIELD,
    parse_sample_rows,
    sample_query_args,
)

SMI_CALL_TIMEOUT_S = 5.0
MAX_SAMPLES = 2000
Sample = Tuple[float, List[Dict[str, Any]]]  # (when, in time.monotonic(); one row per GPU)
Window = Tuple[str, float, float]  # (phase, began, ended)


class Sampler:
    """nvidia-smi every `interval_s` in a background thread, until stopped: bounded by its
    call timeout, MAX_SAMPLES and stop(), which kills a call in flight."""

    def __init__(self, executable: Optional[str], interval_s: float) -> None:
        self.executable = executable
        self.interval_s = interval_s
        self.samples: List[Sample] = []
        self.error: Optional[str] = None if executable else "nvidia-smi not found"
        self.reasons_field = "clocks_event_reasons.active"
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._current: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()

    def query(self) -> Optional[List[Dict[str, Any]]]:
        """One call; None (and `error` set) when nvidia-smi fails."""
        if not self.executable:
            return None
        text, error = self._call(sample_query_args(self.reasons_field))
        if error and "clocks_event_reasons" in error:  # an older driver's name for the field
            self.reasons_field = LEGACY_REASONS_FIELD
            text, error = self._call(sample_query_args(self.reasons_field))
        if error:
            if not self._stop.is_set():  # a call cut short by stop() is no error
                self.error = error
            return None
        rows: List[Dict[str, Any]] = parse_sample_rows(text)
        return rows

    def _call(self, args: List[str]) -> Tuple[str, Optional[str]]:
        assert self.executable is not None
        with self._lock:
            try:
                proc = subprocess.Popen(
                    [self.executable, *args],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    universal_newlines=True,
                )
            except OSError as exc:
                return "", "nvidia-smi: %s" % exc
            self._current = proc
        try:
            out, err = proc.communicate(timeout=SMI_CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return "", "nvidia-smi timed out after %g s" % SMI_CALL_TIMEOUT_S
        finally:
            with self._lock:
                self._current = None
        if proc.returncode != 0:
            return "", ((err or out).strip() or "exit code %s" % proc.returncode)[:300]
        return out, None

    def start(self) -> None:
        if not self.executable or self.error:
            return
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set() and len(self.samples) < MAX_SAMPLES:
            began = time.monotonic()
            rows = self.query()
            if rows:
                self.samples.append(((began + time.monotonic()) / 2, rows))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self._current is not None and self._current.poll() is None:
                with contextlib.suppress(OSError):
                    self._current.kill()
        if self._thread is not None:
            self._thread.join(timeout=SMI_CALL_TIMEOUT_S + 1)

    def record(self) -> Dict[str, Any]:
        return {
            "available": bool(self.executable) and not (self.error and not self.samples),
            "samples": len(self.samples),
            "interval_s": self.interval_s,
            "error": self.error,
        }


# ------------------------------------------------------------------------------ one GPU's readings
def load_summary(
    samples: Sequence[Sample], windows: Sequence[Window], gpu_index: Optional[int]
) -> Dict[str, Any]:
    """One GPU's readings while the load ran (samples taken inside a phase's window).

    The PCIe link is judged by the best generation and width seen while the host copies ran
    (where a sample fell in them; else while any phase ran): a link that trains down never
    reaches its max, one that only saves power between bursts does. `hw_throttle`: True if any
    sample under load had a hardware slowdown reason, False if reasons were read and none had,
    None if they could not be read."""
    empty: Dict[str, Any] = {"samples": 0, "pcie_below_max": None, "hw_throttle": None}
    if gpu_index is None:
        return empty
    under_load, host_copy = _rows_under_load(samples, windows, gpu_index)
    if not under_load:
        return empty
    read = [r["clock_events"] for r in under_load if r.get("clock_events") is not None]
    seen = sorted({name for names in read for name in names})
    throttle: Optional[bool] = None
    if read:
        throttle = any(name in HW_SLOWDOWN_REASONS for name in seen)
    summary: Dict[str, Any] = {
        "samples": len(under_load),
        "pcie_read_during": "host copies" if host_copy else "load",
    }
    summary.update(_pcie_link(host_copy or under_load, under_load))
    summary.update(
        {
            "clock_events": seen,
            "hw_throttle": throttle,
            "hw_throttle_samples": sum(
                1 for names in read if any(n in HW_SLOWDOWN_REASONS for n in names)
            ),
            "sm_mhz_min": _least(r.get("sm_mhz") for r in under_load),
            "sm_mhz_max": _most(r.get("sm_mhz") for r in under_load),
            "sm_max_mhz": _most(r.get("sm_max_mhz") for r in under_load),
            "temperature_c_max": _most(r.get("temperature_c") for r in under_load),
            "power_w_max": _most(r.get("power_w") for r in under_load),
        }
    )
    return summary


def _rows_under_load(
    samples: Sequence[Sample], windows: Sequence[Window], gpu_index: int
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """The GPU's rows sampled inside any phase, and those sampled while the host copies ran."""
    under_load: List[Dict[str, Any]] = []
    host_copy: List[Dict[str, Any]] = []
    for stamp, rows in samples:
        phase = next((name for name, start, end in windows if start <= stamp <= end), None)
        if phase is None:
            continue
        row = next((r for r in rows if r.get("index") == gpu_index), None)
        if row is None:
            continue
        under_load.append(row)
        if phase in HOST_COPY_PHASES:
            host_copy.append(row)
    return under_load, host_copy


def _pcie_link(link_rows: List[Dict[str, Any]], under_load: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The best link seen in `link_rows` against the maximum, and whether it stayed below."""
    gen_seen = _most(r.get("pcie_gen") for r in link_rows)
    width_seen = _most(r.get("pcie_width") for r in link_rows)
    gen_max = _most(r.get("pcie_gen_max") for r in under_load)
    width_max = _most(r.get("pcie_width_max") for r in under_load)
    below: Optional[bool] = None
    if None not in (gen_seen, gen_max, width_seen, width_max):
        below = bool(gen_seen < gen_max or width_seen < width_max)
    return {
        "pcie_gen": gen_seen,
        "pcie_gen_max": gen_max,
        "pcie_width": width_seen,
        "pcie_width_max": width_max,
        "pcie_below_max": below,
    }


def _most(values: Iterable[Any]) -> Any:
    found = [v for v in values if isinstance(v, (int, float))]
    return max(found) if found else None


def _least(values: Iterable[Any]) -> Any:
    found = [v for v in values if isinstance(v, (int, float))]
    return min(found) if found else None
