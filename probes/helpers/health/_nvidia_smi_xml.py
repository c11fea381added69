"""`nvidia-smi -q -x`, the health probe's main source: per GPU its ECC counts, row remapping,
retired pages, clock-event reasons, temperatures and their margins, power, PCIe link and fabric.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Pure, golden-tested through
tests/probes/test_health.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Sequence

from _nvidia_smi import MISSING_VALUE, clock_summary, first, label, leading_int, leading_number, yes

# XML element suffixes that differ from the NVML names.
XML_REASON_ALIASES = {"display_clocks_setting": "display_clock_setting"}


def _text(node: Optional[ET.Element], path: str) -> Optional[str]:
    """The stripped text at `path` under `node`, or None when absent or an N/A-like value."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if not value or MISSING_VALUE.match(value) else value


def _int(node: Optional[ET.Element], path: str) -> Optional[int]:
    number: Optional[int] = leading_int(_text(node, path))
    return number


def _sum(values: Sequence[Optional[int]]) -> Optional[int]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _clock_events(gpu: ET.Element) -> Dict[str, Any]:
    section = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if section is None:  # drivers before R535 say "throttle"
        section = gpu.find("clocks_throttle_reasons")
        prefix = "clocks_throttle_reason_"
    reasons: Dict[str, Optional[bool]] = {}
    if section is not None:
        for child in section:
            name = child.tag[len(prefix) :] if child.tag.startswith(prefix) else child.tag
            name = XML_REASON_ALIASES.get(name, name)
            reasons[name] = yes((child.text or "").strip() or None)
    counters_section = first(
        gpu.find("clocks_event_reasons_counters"), gpu.find("clocks_throttle_reasons_counters")
    )
    counters: Dict[str, Optional[int]] = {}
    if counters_section is not None:
        for child in counters_section:
            name = re.sub(r"^clocks_(?:event|throttle)_reasons_counters_", "", child.tag)
            counters[name] = _int(counters_section, child.tag)
    summary: Dict[str, Any] = clock_summary(
        reasons if section is not None else None, counters or None
    )
    return summary


def _ecc_counts(section: Optional[ET.Element]) -> Dict[str, Optional[int]]:
    """Corrected and uncorrected totals of one ECC timescale, in any of nvidia-smi's layouts:
    sram_/dram_(un)correctable[_parity|_secded] (R520+), single_bit/double_bit totals (older)."""
    if section is None:
        return {"corrected": None, "uncorrected": None}
    if section.find("single_bit") is not None or section.find("double_bit") is not None:
        return {
            "corrected": _int(section, "single_bit/total"),
            "uncorrected": _int(section, "double_bit/total"),
        }
    corrected: List[Optional[int]] = []
    uncorrected: List[Optional[int]] = []
    for child in section:
        if child.tag.endswith("_threshold_exceeded"):
            continue
        value = _int(section, child.tag)
        if "uncorrectable" in child.tag:
            uncorrected.append(value)
        elif "correctable" in child.tag:
            corrected.append(value)
    return {"corrected": _sum(corrected), "uncorrected": _sum(uncorrected)}


def _ecc(gpu: ET.Element) -> Dict[str, Any]:
    errors = gpu.find("ecc_errors")
    return {
        "mode": _text(gpu, "ecc_mode/current_ecc"),
        "pending_mode": _text(gpu, "ecc_mode/pending_ecc"),
        "volatile": _ecc_counts(errors.find("volatile") if errors is not None else None),
        "aggregate": _ecc_counts(errors.find("aggregate") if errors is not None else None),
        "sram_threshold_exceeded": yes(_text(errors, "aggregate/sram_threshold_exceeded")),
        "unrepairable_memory": yes(_text(errors, "unrepairable_memory")),
    }


def _remapped_rows(gpu: ET.Element) -> Optional[Dict[str, Any]]:
    section = gpu.find("remapped_rows")
    if section is None:
        return None
    rows = {
        "correctable": _int(section, "remapped_row_corr"),
        "uncorrectable": _int(section, "remapped_row_unc"),
        "pending": yes(_text(section, "remapped_row_pending")),
        "failure": yes(_text(section, "remapped_row_failure")),
    }
    return rows if any(v is not None for v in rows.values()) else None  # N/A: no row remapper


def _retired_pages(gpu: ET.Element) -> Optional[Dict[str, Any]]:
    section = gpu.find("retired_pages")
    if section is None:
        return None
    pages = {
        "single_bit": _int(section, "multiple_single_bit_retirement/retired_count"),
        "double_bit": _int(section, "double_bit_retirement/retired_count"),
        "pending": yes(
            first(_text(section, "pending_retirement"), _text(section, "pending_blacklist"))
        ),
    }
    return pages if any(v is not None for v in pages.values()) else None  # N/A on Hopper


def _temperature(gpu: ET.Element) -> Dict[str, Any]:
    t = gpu.find("temperature")
    temp = _int(t, "gpu_temp")
    slowdown = _int(t, "gpu_temp_slow_threshold")
    shutdown = _int(t, "gpu_temp_max_threshold")
    # Hopper and later drivers report T.Limit: the current headroom below the limit, and the
    # thresholds as headroom values (slowdown at -2 C means 2 C past the limit).
    tlimit = _int(t, "gpu_temp_tlimit")
    slow_tlimit = _int(t, "gpu_temp_slow_tlimit_threshold")
    shut_tlimit = _int(t, "gpu_temp_max_tlimit_threshold")
    return {
        "gpu_c": temp,
        "memory_c": _int(t, "memory_temp"),
        "slowdown_c": slowdown,
        "shutdown_c": shutdown,
        "tlimit_c": tlimit,
        "slowdown_margin_c": _margin(temp, slowdown, tlimit, slow_tlimit),
        "shutdown_margin_c": _margin(temp, shutdown, tlimit, shut_tlimit),
    }


def _margin(
    temp: Optional[int],
    threshold: Optional[int],
    tlimit: Optional[int],
    tlimit_threshold: Optional[int],
) -> Optional[int]:
    if temp is not None and threshold is not None:
        return threshold - temp
    if tlimit is not None and tlimit_threshold is not None:
        return tlimit - tlimit_threshold
    return None


def _power(gpu: ET.Element) -> Dict[str, Any]:
    readings = first(gpu.find("gpu_power_readings"), gpu.find("power_readings"))
    draw = first(
        leading_number(_text(readings, "instant_power_draw")),
        leading_number(_text(readings, "power_draw")),
        leading_number(_text(readings, "average_power_draw")),
    )
    limit = first(
        leading_number(_text(readings, "current_power_limit")),
        leading_number(_text(readings, "enforced_power_limit")),
        leading_number(_text(readings, "power_limit")),
    )
    return {"draw_w": draw, "limit_w": limit}


def _pcie_link(gpu: ET.Element) -> Dict[str, Any]:
    link = gpu.find("pci/pci_gpu_link_info")
    return {
        "gen": _int(link, "pcie_gen/current_link_gen"),
        "gen_max": _int(link, "pcie_gen/max_link_gen"),
        "width": _int(link, "link_widths/current_link_width"),
        "width_max": _int(link, "link_widths/max_link_width"),
        "replays": _int(gpu, "pci/replay_counter"),
    }


def _fabric(gpu: ET.Element) -> Dict[str, Any]:
    return {
        "state": _text(gpu, "fabric/state"),
        "status": _text(gpu, "fabric/status"),
        "clique_id": _text(gpu, "fabric/cliqueId"),
        "cluster_uuid": _text(gpu, "fabric/clusterUuid"),
    }


def parse_gpu_xml(gpu: ET.Element, index: int) -> Dict[str, Any]:
    """One <gpu> element of `nvidia-smi -q -x` -> its health facts."""
    bus_id = first(_text(gpu, "pci/pci_bus_id"), gpu.get("id"))
    return {
        "index": index,
        "gpu": label(index, bus_id),
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "serial": _text(gpu, "serial"),
        "pci_bus_id": bus_id,
        "persistence_mode": _text(gpu, "persistence_mode"),
        "compute_mode": _text(gpu, "compute_mode"),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "gsp_firmware": _text(gpu, "gsp_firmware_version"),
        "vbios": _text(gpu, "vbios_version"),
        "performance_state": _text(gpu, "performance_state"),
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        "ecc": _ecc(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "retired_pages": _retired_pages(gpu),
        "clock_events": _clock_events(gpu),
        "temperature": _temperature(gpu),
        "power": _power(gpu),
        "clocks": {
            "sm_mhz": _int(gpu, "clocks/sm_clock"),
            "sm_max_mhz": _int(gpu, "max_clocks/sm_clock"),
        },
        "pcie": _pcie_link(gpu),
        "fabric": _fabric(gpu),
        "nvlink": None,
    }


def parse_smi_xml(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q -x` -> driver and CUDA versions and one dict per GPU, in nvidia-smi's index
    order (the order of the <gpu> elements). Raises ET.ParseError on text that is not XML."""
    start = text.find("<nvidia_smi_log")
    root = ET.fromstring(text[start:] if start > 0 else text)  # drops the DOCTYPE line
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": [parse_gpu_xml(gpu, i) for i, gpu in enumerate(root.findall("gpu"))],
    }
