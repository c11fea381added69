"""Per-GPU speed and every GPU pair's copy rate, all GPUs at once, with PCIe and clocks sampled under load (opt-in: --gpubench)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

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
SHIPS = ("_gpubench_worker.py",)  # files the bundle carries with this probe (never written)
WORKER_FILE = SHIPS[0]
PRELOAD = ("torch",)  # imported once by the runner's fork server (probes/_host_runner.py)

MARKER = "FLEET_GPUBENCH "
MiB = 1 << 20
MAX_BUDGET_S = TIMEOUT_S - 20  # leave the runner's backstop room to see the probe end itself
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
STDERR_TAIL_LINES = 12
MAX_ERROR_CHARS = 1500
# The NVLink-multicast policy of the lent machines, in every worker (nothing here uses it).
FORCED_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

# nvidia-smi, sampled in a thread while the load runs: one short call every sample_interval_s.
SMI_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "clocks_event_reasons.active",
    "clocks.current.sm",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "memory.used",
    "utilization.gpu",
)
LEGACY_REASONS_FIELD = "clocks_throttle_reasons.active"  # drivers before R535
SMI_CALL_TIMEOUT_S = 5.0
MAX_SAMPLES = 2000
MISSING = re.compile(
    r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|Unknown)\]?$", re.I
)
# nvmlClocksEventReason* bits (nvml.h), as probes/health.py decodes them.
CLOCK_EVENT_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SYS_PCI = "/sys/bus/pci/devices"


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
def parse_options(options: Dict[str, Any]) -> Config:
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
        time_budget_s=_number(options, "time_budget_s", 30.0, 5.0, MAX_BUDGET_S),
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


# ------------------------------------------------------------------------------ planning (pure)
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


MIN_PHASE_BUDGET_S = 0.02  # below this a figure is noise: stop early instead


# ------------------------------------------------------------------------------ nvidia-smi (pure)
def smi_query_args(reasons_field: str) -> List[str]:
    fields = [reasons_field if f == "clocks_event_reasons.active" else f for f in SMI_FIELDS]
    return ["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def _value(raw: Optional[str]) -> Optional[str]:
    if raw is None:
        return None
    raw = raw.strip()
    return None if not raw or MISSING.match(raw) else raw


def _int(raw: Optional[str]) -> Optional[int]:
    value = _value(raw)
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


def _float(raw: Optional[str]) -> Optional[float]:
    value = _value(raw)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def decode_clock_events(mask: Optional[str]) -> Optional[List[str]]:
    """'0x0000000000000088' -> ['hw_slowdown', 'hw_power_brake_slowdown']; None if unreadable."""
    value = _value(mask)
    if value is None:
        return None
    try:
        bits = int(value, 16)
    except ValueError:
        return None
    names = [name for bit, name in CLOCK_EVENT_BITS if bits & bit]
    unknown = bits & ~sum(bit for bit, _ in CLOCK_EVENT_BITS)
    if unknown:
        names.append("unknown_0x%x" % unknown)
    return names


def parse_smi_rows(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits` -> one dict per GPU."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS) or _int(cells[0]) is None:
            continue
        raw = dict(zip(SMI_FIELDS, cells))
        rows.append(
            {
                "index": _int(raw["index"]),
                "uuid": _value(raw["uuid"]),
                "pci_bus_id": _value(raw["pci.bus_id"]),
                "pcie_gen": _int(raw["pcie.link.gen.current"]),
                "pcie_gen_max": _int(raw["pcie.link.gen.max"]),
                "pcie_width": _int(raw["pcie.link.width.current"]),
                "pcie_width_max": _int(raw["pcie.link.width.max"]),
                "clock_events": decode_clock_events(raw["clocks_event_reasons.active"]),
                "sm_mhz": _int(raw["clocks.current.sm"]),
                "sm_max_mhz": _int(raw["clocks.max.sm"]),
                "temperature_c": _int(raw["temperature.gpu"]),
                "power_w": _float(raw["power.draw"]),
                "memory_used_mib": _int(raw["memory.used"]),
                "utilization_pct": _int(raw["utilization.gpu"]),
            }
        )
    return rows


def bus_key(bus_id: Any) -> Optional[Tuple[int, int, int]]:
    """'00000000:18:00.0' or [domain, bus, device] -> (domain, bus, device), to match nvidia-smi's
    PCI address with torch's."""
    if isinstance(bus_id, (list, tuple)) and len(bus_id) == 3:
        return int(bus_id[0]), int(bus_id[1]), int(bus_id[2])
    found = re.match(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.[0-7]$", str(bus_id))
    if not found:
        return None
    return int(found.group(1) or "0", 16), int(found.group(2), 16), int(found.group(3), 16)


def uuid_key(uuid: Any) -> Optional[str]:
    """torch says 'a1b2c3d4-…', nvidia-smi 'GPU-a1b2c3d4-…': the hex digits, lower case."""
    if not uuid:
        return None
    digits = re.sub(r"[^0-9a-f]", "", str(uuid).lower().replace("gpu-", "", 1))
    return digits or None


def match_rows(
    identities: Dict[int, Dict[str, Any]], rows: List[Dict[str, Any]]
) -> Dict[int, Dict[str, Any]]:
    """torch's device index -> nvidia-smi's row of the same GPU: by UUID, else PCI address, else
    (the workers run with CUDA_DEVICE_ORDER=PCI_BUS_ID) by index when the counts agree."""
    found: Dict[int, Dict[str, Any]] = {}
    for cuda_index, identity in identities.items():
        for row in rows:
            same_uuid = uuid_key(identity.get("uuid")) and uuid_key(
                identity.get("uuid")
            ) == uuid_key(row.get("uuid"))
            same_bus = bus_key(identity.get("pci")) and bus_key(identity.get("pci")) == bus_key(
                row.get("pci_bus_id")
            )
            if same_uuid or same_bus:
                found[cuda_index] = row
                break
    if not found and len(rows) == len(identities):
        by_index = {row["index"]: row for row in rows}
        found = {i: by_index[i] for i in identities if i in by_index}
    return found


def load_summary(
    samples: Sequence[Tuple[float, List[Dict[str, Any]]]],
    windows: Sequence[Tuple[str, float, float]],
    gpu_index: Optional[int],
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
    if not under_load:
        return empty
    link_rows = host_copy or under_load
    gen_seen = _most(r.get("pcie_gen") for r in link_rows)
    width_seen = _most(r.get("pcie_width") for r in link_rows)
    gen_max = _most(r.get("pcie_gen_max") for r in under_load)
    width_max = _most(r.get("pcie_width_max") for r in under_load)
    below: Optional[bool] = None
    if None not in (gen_seen, gen_max, width_seen, width_max):
        below = bool(gen_seen < gen_max or width_seen < width_max)
    read = [r["clock_events"] for r in under_load if r.get("clock_events") is not None]
    seen = sorted({name for names in read for name in names})
    throttle: Optional[bool] = None
    if read:
        throttle = any(name in HW_REASONS for name in seen)
    return {
        "samples": len(under_load),
        "pcie_read_during": "host copies" if host_copy else "load",
        "pcie_gen": gen_seen,
        "pcie_gen_max": gen_max,
        "pcie_width": width_seen,
        "pcie_width_max": width_max,
        "pcie_below_max": below,
        "clock_events": seen,
        "hw_throttle": throttle,
        "hw_throttle_samples": sum(1 for names in read if any(n in HW_REASONS for n in names)),
        "sm_mhz_min": _least(r.get("sm_mhz") for r in under_load),
        "sm_mhz_max": _most(r.get("sm_mhz") for r in under_load),
        "sm_max_mhz": _most(r.get("sm_max_mhz") for r in under_load),
        "temperature_c_max": _most(r.get("temperature_c") for r in under_load),
        "power_w_max": _most(r.get("power_w") for r in under_load),
    }


def _most(values: Iterable[Any]) -> Any:
    found = [v for v in values if isinstance(v, (int, float))]
    return max(found) if found else None


def _least(values: Iterable[Any]) -> Any:
    found = [v for v in values if isinstance(v, (int, float))]
    return min(found) if found else None


def parse_cpulist(text: str) -> List[int]:
    """'0-15,32-47' -> [0, …, 15, 32, …, 47] (a sysfs local_cpulist)."""
    cpus: List[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            cpus += range(int(low), int(high) + 1)
        elif part.strip():
            cpus.append(int(part))
    return cpus


# ------------------------------------------------------------------------------ the results (pure)
def gpu_entry(
    cuda_index: int,
    identity: Dict[str, Any],
    row: Optional[Dict[str, Any]],
    results: Dict[str, Dict[str, Any]],
) -> Dict[str, Any]:
    """One GPU's part of the result: who it is (nvidia-smi's index, UUID and bus id where
    matched), its figures, and their detail."""
    uuid = (row or {}).get("uuid") or (
        ("GPU-" + str(identity["uuid"])) if identity.get("uuid") else None
    )
    bus = (row or {}).get("pci_bus_id")
    if bus is None and identity.get("pci"):
        domain, number, device = identity["pci"]
        bus = "%08X:%02X:%02X.0" % (domain, number, device)
    tflops: Dict[str, Any] = {}
    matmul: Dict[str, Any] = {}
    for phase, result in sorted(results.items()):
        if phase.startswith("matmul:"):
            dtype = phase.split(":", 1)[1]
            matmul[dtype] = {k: v for k, v in result.items() if k not in ("phase", "tflops")}
            if isinstance(result.get("tflops"), (int, float)):
                tflops[dtype] = result["tflops"]
    gbps = {
        p: results[p]["gbps"]
        for p in GPU_PHASES
        if isinstance(results.get(p, {}).get("gbps"), (int, float))
    }
    copies = {
        p: {k: v for k, v in results[p].items() if k != "phase"} for p in GPU_PHASES if p in results
    }
    return {
        "index": (row or {}).get("index", cuda_index),
        "cuda_index": cuda_index,
        "uuid": uuid,
        "pci_bus_id": bus,
        "name": identity.get("name"),
        "capability": identity.get("capability"),
        "memory_gib": identity.get("memory_gib"),
        "tflops": tflops,
        "gbps": gbps,
        "matmul": matmul,
        "copies": copies,
    }


def pair_entries(
    devices: Sequence[int],
    index_of: Dict[int, int],
    peer_access: Dict[str, bool],
    results: Dict[str, Dict[str, Any]],
) -> List[Dict[str, Any]]:
    """Every ordered pair (by the GPUs' reported index): its GB/s one way, with the reverse
    direction running (both ways), and with every pair running (all active)."""
    names = {
        "pairs:one_way": "one_way",
        "pairs:both_ways": "both_ways",
        "pairs:all_active": "all_active",
    }
    entries = []
    for src in devices:
        for dst in devices:
            if src == dst:
                continue
            key = "%d>%d" % (src, dst)
            gbps = {}
            for phase, name in names.items():
                copy = ((results.get(phase) or {}).get("copies") or {}).get(key) or {}
                if isinstance(copy.get("gbps"), (int, float)):
                    gbps[name] = copy["gbps"]
            entries.append(
                {
                    "src": index_of.get(src, src),
                    "dst": index_of.get(dst, dst),
                    "peer_access": peer_access.get(key),
                    "gbps": gbps,
                }
            )
    return sorted(entries, key=lambda e: (e["src"], e["dst"]))


def add_contention(gpus: List[Dict[str, Any]], pairs: List[Dict[str, Any]]) -> None:
    """Each GPU's peer copy rate out and in with every pair active: the sum over its pairs."""
    for gpu in gpus:
        out = [
            p["gbps"]["all_active"]
            for p in pairs
            if p["src"] == gpu["index"] and "all_active" in p["gbps"]
        ]
        into = [
            p["gbps"]["all_active"]
            for p in pairs
            if p["dst"] == gpu["index"] and "all_active" in p["gbps"]
        ]
        if out:
            gpu["gbps"]["peer_out_all_active"] = float("%.4g" % sum(out))
        if into:
            gpu["gbps"]["peer_in_all_active"] = float("%.4g" % sum(into))


# ------------------------------------------------------------------------------ the sampler
class Sampler:
    """nvidia-smi every `interval_s` in a background thread, until stopped: bounded by its
    call timeout, MAX_SAMPLES and stop(), which kills a call in flight."""

    def __init__(self, executable: Optional[str], interval_s: float) -> None:
        self.executable = executable
        self.interval_s = interval_s
        self.samples: List[Tuple[float, List[Dict[str, Any]]]] = []
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
        text, error = self._call(smi_query_args(self.reasons_field))
        if error and "clocks_event_reasons" in error:  # an older driver's name for the field
            self.reasons_field = LEGACY_REASONS_FIELD
            text, error = self._call(smi_query_args(self.reasons_field))
        if error:
            if not self._stop.is_set():  # a call cut short by stop() is no error
                self.error = error
            return None
        return parse_smi_rows(text)

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


# ------------------------------------------------------------------------------ the workers
def worker_source() -> str:
    """The worker's text: from the bundle on a host, else from the file beside this one."""
    shipped = globals().get("__shipped__") or {}
    if WORKER_FILE in shipped:
        return str(shipped[WORKER_FILE])
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, WORKER_FILE), encoding="utf-8") as handle:
        return handle.read()


def plan_functions() -> Dict[str, Any]:
    """The worker's namespace without running it (its pure functions, for tests)."""
    namespace: Dict[str, Any] = {"__name__": "fleet_gpubench_worker"}
    exec(compile(worker_source(), WORKER_FILE, "exec"), namespace)
    return namespace


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


def start_worker(name: str, cfg: Dict[str, Any], env: Dict[str, str]) -> Worker:
    proc = subprocess.Popen(
        [sys.executable, "-c", worker_source(), json.dumps(cfg)],
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


def local_cpus(bus_id: Optional[str]) -> Optional[List[int]]:
    """The CPUs next to a GPU (sysfs local_cpulist), or None where not readable."""
    key = bus_key(bus_id) if bus_id else None
    if key is None:
        return None
    path = os.path.join(SYS_PCI, "%04x:%02x:%02x.0" % key, "local_cpulist")
    try:
        with open(path, encoding="ascii") as handle:
            cpus = parse_cpulist(handle.read())
    except (OSError, ValueError):
        return None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(cpus)
    return sorted(set(cpus) & set(allowed)) or None


# ------------------------------------------------------------------------------ the run
class Bench:
    """The benchmark's course: GPU workers first (every GPU at once), then the pairs worker,
    each phase given its share of the budget; at the deadline everything is killed."""

    def __init__(self, config: Config, count: int, smi: Optional[str], started: float) -> None:
        self.config = config
        self.count = count
        self.started = started
        self.deadline = started + config.time_budget_s - 2.0  # room to kill and read back
        self.sampler = Sampler(smi, config.sample_interval_s)
        self.phases = plan_phases(config, count)
        self.rounds = pair_schedule(count, config.pair_rounds) if count > 1 else []
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
        return [phase_weight(p, self.config, len(self.rounds)) for p in phases]

    def run(self, idle_rows: Optional[List[Dict[str, Any]]], env: Dict[str, str]) -> None:
        gpu_phases = [p for p in self.phases if not p.startswith("pairs:")]
        pair_phases = [p for p in self.phases if p.startswith("pairs:")]
        by_index = {row["index"]: row for row in idle_rows or []}
        gpu_workers = []
        for index in range(self.count):
            cpus = local_cpus((by_index.get(index) or {}).get("pci_bus_id"))
            cfg = dict(self.worker_config("gpu", gpu_phases, cpus), device=index)
            gpu_workers.append(start_worker("GPU%d" % index, cfg, env))
        self.workers += gpu_workers
        pairs = None
        if pair_phases:  # it imports torch while the GPUs measure, then waits for its turn
            pairs = start_worker("pairs", self.worker_config("pairs", pair_phases, None), env)
            self.workers.append(pairs)
        self.sampler.start()
        self.run_phases(gpu_phases, gpu_workers, self.phases)
        for worker in gpu_workers:  # their memory is free before the peer copies start
            worker.end(grace_s=3.0)
        if pairs is not None:
            self.run_phases(pair_phases, [pairs], pair_phases)

    def run_phases(self, phases: List[str], workers: List[Worker], planned: List[str]) -> None:
        for position, phase in enumerate(phases):
            live = [w for w in workers if w.alive() and w.name not in self.failed]
            if self.stopped or not live:
                return
            ready = [w for w in live if self._wait_ready(w, phase)]
            for worker in live:
                if worker not in ready:
                    self._fail(worker, "not ready for %s: %s" % (phase, worker.why()))
            if self.stopped or not ready:
                return
            left = planned[planned.index(phase) :]
            budget = phase_budget(
                self.deadline - time.monotonic(), self.weights(left), self.config.measure_s
            )
            if budget < MIN_PHASE_BUDGET_S:
                self._stop("the %gs budget ran out before %s" % (self.config.time_budget_s, phase))
                return
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
                if answered == len(ready) == len(workers)
                else ("partial" if answered else "failed"),
                "budget_s": round(budget, 3),
                "elapsed_s": round(ended - began, 3),
            }
            if time.monotonic() >= self.deadline and position + 1 < len(phases):
                self.status[phase]["status"] = "stopped"
                self._stop("the %gs budget ran out during %s" % (self.config.time_budget_s, phase))
                return

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


def memory_used(rows: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    if not rows:
        return None
    return {str(r["index"]): r.get("memory_used_mib") for r in rows}


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
    base["planned"] = {
        "phases": bench.phases,
        "dtypes": list(config.dtypes),
        "shapes": ["x".join(str(d) for d in s) for s in config.shapes],
        "copy_mib": config.copy_bytes // MiB,
        "host_copy_mib": config.host_copy_bytes // MiB,
        "pair_copy_mib": config.pair_copy_bytes // MiB,
        "pair_rounds": [[list(p) for p in r] for r in bench.rounds],
    }
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
    measured = any(g["tflops"] or g["gbps"] for g in base["gpus"])
    if not measured:
        errors = [g["error"] for g in base["gpus"] if g.get("error")]
        why = base["stopped"] or (errors[0] if errors else "no figure measured")
        return {"ok": False, "data": base, "error": "no figure measured: %s" % why}
    return {"ok": True, "data": base, "error": None}


if __name__ == "__main__":
    del sys.path[0]  # so `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
