"""nvidia-smi's words, read one way by every probe that runs it (health, gpubench): the
clock-event reason bits, its spellings of "no value", the numbers in its cells, and its
`--query-gpu` tables (health's fallback for `-q -x`, gpubench's samples under load).

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Pure: nothing here touches the host;
golden-tested through tests/probes/test_health.py and test_gpubench.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

# nvmlClocksEventReason* (nvml.h; the same bits as the deprecated nvmlClocksThrottleReason*).
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
CLOCK_EVENT_NAMES = tuple(name for _, name in CLOCK_EVENT_BITS)
# Reasons that mean the hardware pulled the clocks down: HW Slowdown and its two causes.
HW_SLOWDOWN_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

MISSING_VALUE = re.compile(
    r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|Unknown|"
    r"Requested functionality has been deprecated)\]?$",
    re.IGNORECASE,
)
NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")

# health: only where `-q -x` does not parse, the same per-GPU facts from one --query-gpu call.
HEALTH_QUERY_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "clocks_event_reasons.active",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.aggregate.total",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "retired_pages.pending",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.current.sm",
    "clocks.max.sm",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "compute_mode",
)
HEALTH_QUERY_ARGS = ("--query-gpu=" + ",".join(HEALTH_QUERY_FIELDS), "--format=csv")

# gpubench: sampled in a thread while the load runs, one short call every sample_interval_s.
SAMPLE_FIELDS = (
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

Value = Callable[[str], Optional[str]]  # a query row's cell by column name, None when missing


# ---------------------------------------------------------------- cells


def cell(raw: Optional[str]) -> Optional[str]:
    """A cell's text, None when empty or one of nvidia-smi's spellings of "no value"."""
    if raw is None:
        return None
    raw = raw.strip()
    return None if not raw or MISSING_VALUE.match(raw) else raw


def leading_number(value: Optional[str]) -> Optional[float]:
    """The number a value starts with ('350.00 W' -> 350.0), None when it starts with none."""
    if value is None:
        return None
    match = NUMBER.match(value.strip())
    return float(match.group(0)) if match else None


def leading_int(value: Optional[str]) -> Optional[int]:
    number = leading_number(value)
    return None if number is None else int(number)


def plain_int(raw: Optional[str]) -> Optional[int]:
    """A unitless cell (`--format=csv,nounits`) as an int, None when missing or not a number."""
    value = cell(raw)
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


def plain_float(raw: Optional[str]) -> Optional[float]:
    value = cell(raw)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def yes(value: Optional[str]) -> Optional[bool]:
    """Yes / Enabled / Active -> True, No / Disabled / Not Active -> False, else None."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("yes", "true", "enabled", "active"):
        return True
    if lowered in ("no", "false", "disabled", "not active"):
        return False
    return None


def first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def label(index: Any, bus_id: Optional[str]) -> str:
    """How the health probe names a GPU: 'GPU0 (00000000:18:00.0)'."""
    return "GPU%s (%s)" % (index, bus_id or "bus id not reported")


# ---------------------------------------------------------------- clock-event reasons


def decode_clock_event_reasons(mask: Optional[str]) -> Optional[List[str]]:
    """`clocks_event_reasons.active` ('0x0000000000000088') -> ['hw_slowdown',
    'hw_power_brake_slowdown']; None when missing or unreadable."""
    if mask is None:
        return None
    try:
        value = int(mask.strip(), 16)
    except ValueError:
        return None
    names = [name for bit, name in CLOCK_EVENT_BITS if value & bit]
    unknown = value & ~sum(bit for bit, _ in CLOCK_EVENT_BITS)
    if unknown:
        names.append("unknown_0x%x" % unknown)
    return names


def encode_clock_event_reasons(active: Sequence[str]) -> str:
    bits = dict((name, bit) for bit, name in CLOCK_EVENT_BITS)
    return "0x%016x" % sum(bits.get(name, 0) for name in active)


def clock_summary(
    reasons: Optional[Mapping[str, Optional[bool]]], counters: Optional[Dict[str, Optional[int]]]
) -> Dict[str, Any]:
    """Active reasons by name, the NVML mask they make, and whether a HW slowdown is on: True if
    one of HW_SLOWDOWN_REASONS is active, False if HW Slowdown reads not active (its two causes
    may be N/A on older GPUs), None when HW Slowdown itself is not reported."""
    if reasons is None:
        return {"active": None, "mask": None, "hw_slowdown": None, "counters_us": counters}
    active = [name for name, on in reasons.items() if on]
    if any(reasons.get(name) for name in HW_SLOWDOWN_REASONS):
        hw_slowdown: Optional[bool] = True
    else:
        hw_slowdown = False if reasons.get("hw_slowdown") is False else None
    return {
        "active": active,
        "mask": encode_clock_event_reasons(active),
        "hw_slowdown": hw_slowdown,
        "counters_us": counters,
    }


# ---------------------------------------------------------------- health's --query-gpu


def parse_query_health(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=<HEALTH_QUERY_FIELDS or a subset> --format=csv` -> the same per-GPU
    shape as the XML gives, with what the query cannot say (fabric, thresholds, names) left null."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [column.split("[")[0].strip() for column in lines[0].split(",")]
    gpus = []
    for position, line in enumerate(lines[1:]):
        row = dict(zip(header, (raw.strip() for raw in line.split(","))))
        gpus.append(_health_row(_reader(row), position))
    return gpus


def _reader(row: Dict[str, str]) -> Value:
    def value(column: str) -> Optional[str]:
        return cell(row.get(column))

    return value


def _health_row(value: Value, position: int) -> Dict[str, Any]:
    index = first(leading_int(value("index")), position)
    bus_id = value("pci.bus_id")
    active = decode_clock_event_reasons(value("clocks_event_reasons.active"))
    reasons = None if active is None else {name: name in active for name in CLOCK_EVENT_NAMES}
    pending_pages = yes(value("retired_pages.pending"))
    return {
        "index": index,
        "gpu": label(index, bus_id),
        "name": None,
        "uuid": value("uuid"),
        "serial": None,
        "pci_bus_id": bus_id,
        "persistence_mode": value("persistence_mode"),
        "compute_mode": value("compute_mode"),
        "mig_mode": None,
        "gsp_firmware": None,
        "vbios": None,
        "performance_state": None,
        "recovery_action": None,
        "ecc": _query_ecc(value),
        "remapped_rows": _query_remapped_rows(value),
        "retired_pages": None
        if pending_pages is None
        else {"single_bit": None, "double_bit": None, "pending": pending_pages},
        "clock_events": clock_summary(reasons, None),
        "temperature": _query_temperature(leading_int(value("temperature.gpu"))),
        "power": {
            "draw_w": leading_number(value("power.draw")),
            "limit_w": leading_number(value("power.limit")),
        },
        "clocks": {
            "sm_mhz": leading_int(value("clocks.current.sm")),
            "sm_max_mhz": leading_int(value("clocks.max.sm")),
        },
        "pcie": _query_pcie(value),
        "fabric": {"state": None, "status": None, "clique_id": None, "cluster_uuid": None},
        "nvlink": None,
    }


def _query_ecc(value: Value) -> Dict[str, Any]:
    return {
        "mode": value("ecc.mode.current"),
        "pending_mode": None,
        "volatile": {
            "corrected": leading_int(value("ecc.errors.corrected.volatile.total")),
            "uncorrected": leading_int(value("ecc.errors.uncorrected.volatile.total")),
        },
        "aggregate": {
            "corrected": leading_int(value("ecc.errors.corrected.aggregate.total")),
            "uncorrected": leading_int(value("ecc.errors.uncorrected.aggregate.total")),
        },
        "sram_threshold_exceeded": None,
        "unrepairable_memory": None,
    }


def _query_remapped_rows(value: Value) -> Optional[Dict[str, Any]]:
    remapped = {
        "correctable": leading_int(value("remapped_rows.correctable")),
        "uncorrectable": leading_int(value("remapped_rows.uncorrectable")),
        "pending": yes(value("remapped_rows.pending")),
        "failure": yes(value("remapped_rows.failure")),
    }
    return remapped if any(v is not None for v in remapped.values()) else None


def _query_temperature(temp: Optional[int]) -> Dict[str, Any]:
    return {
        "gpu_c": temp,
        "memory_c": None,
        "slowdown_c": None,
        "shutdown_c": None,
        "tlimit_c": None,
        "slowdown_margin_c": None,
        "shutdown_margin_c": None,
    }


def _query_pcie(value: Value) -> Dict[str, Any]:
    return {
        "gen": leading_int(value("pcie.link.gen.current")),
        "gen_max": leading_int(value("pcie.link.gen.max")),
        "width": leading_int(value("pcie.link.width.current")),
        "width_max": leading_int(value("pcie.link.width.max")),
        "replays": None,
    }


# ---------------------------------------------------------------- gpubench's samples


def sample_query_args(reasons_field: str) -> List[str]:
    """The sampler's arguments, with the clock-event field under the name this driver knows."""
    fields = [reasons_field if f == "clocks_event_reasons.active" else f for f in SAMPLE_FIELDS]
    return ["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def parse_sample_rows(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-gpu=<SAMPLE_FIELDS> --format=csv,noheader,nounits` -> one dict per GPU."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SAMPLE_FIELDS) or plain_int(cells[0]) is None:
            continue
        raw = dict(zip(SAMPLE_FIELDS, cells))
        rows.append(
            {
                "index": plain_int(raw["index"]),
                "uuid": cell(raw["uuid"]),
                "pci_bus_id": cell(raw["pci.bus_id"]),
                "pcie_gen": plain_int(raw["pcie.link.gen.current"]),
                "pcie_gen_max": plain_int(raw["pcie.link.gen.max"]),
                "pcie_width": plain_int(raw["pcie.link.width.current"]),
                "pcie_width_max": plain_int(raw["pcie.link.width.max"]),
                "clock_events": decode_clock_event_reasons(raw["clocks_event_reasons.active"]),
                "sm_mhz": plain_int(raw["clocks.current.sm"]),
                "sm_max_mhz": plain_int(raw["clocks.max.sm"]),
                "temperature_c": plain_int(raw["temperature.gpu"]),
                "power_w": plain_float(raw["power.draw"]),
                "memory_used_mib": plain_int(raw["memory.used"]),
                "utilization_pct": plain_int(raw["utilization.gpu"]),
            }
        )
    return rows
