"""Issue 38's fleet, from recorded runs and real captures: the 8-host loopback run of two kinds of
machine (tests/probes/golden/real_run/mixed8_loopback.json: h01-h02 2× H200, h03-h08 8× RTX PRO
6000 Blackwell; h05's torch 2.6 lacks sm_120, h07 sets NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree),
with the health probe's data built by the real parsers from real captures on the H200 hosts:

    h01  the real 2× H200 pair's captures (tests/probes/golden/health/h200x2): healthy;
    h02  the sick H200 (ecc_host_health): GPU1's row remap pending, one uncorrected DRAM ECC
         error on it, and real Xid 94 and Xid 63 kernel-log lines said of GPU1's bus.

The Blackwell hosts' replay has no `nvidia-smi -q -x` capture, so the health probe did not run
there (they ran the seven probes they were recorded with)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.mixed_fleets import mixed8
from tests.probes.health_cases import case_data, health, host_facts, text

SICK, NO_SM120, P2P_OFF = "h02", "h05", "h07"


def kernel_log_line(case: str, xid: int, bus: str) -> str:
    """The real line of Xid `xid` in `case`'s dmesg, said of the GPU at `bus`."""
    found = text(case, "dmesg.txt") or ""
    line = next(line for line in found.splitlines() if f"): {xid}, " in line)
    start, end = line.index("(PCI:") + len("(PCI:"), line.index("): ")
    return line[:start] + bus + line[end:]


def ecc_host_health() -> dict[str, Any]:
    """The issue's sick H200: the real pair's nvidia-smi XML with GPU1's remap pending (public
    capture remap_pending_gpud80), one uncorrected DRAM ECC error on it (volatile and
    aggregate), and the real Xid 94 and Xid 63 lines of two public logs said of GPU1's bus."""
    case = "remap_pending_gpud80"
    xml = text(case, "nvidia-smi_-q_-x.xml") or ""
    head, gpu1 = xml.split('<gpu id="00000000:00:07.0">')
    gpu1 = gpu1.replace("<dram_uncorrectable>0<", "<dram_uncorrectable>1<")
    log = "\n".join(
        [
            kernel_log_line("xid43_31_94_akash244", 94, "0000:00:07"),
            kernel_log_line("xid63_remap_pending_stas00", 63, "0000:00:07"),
        ]
    )
    return health.build_data(  # type: ignore[no-any-return]
        head + '<gpu id="00000000:00:07.0">' + gpu1,
        text("h200x2", "nvidia-smi_nvlink_-s.txt"),
        None,
        text("h200x2", "proc_driver_nvidia_version.txt"),
        ("dmesg", log + "\n", {}),
        host_facts(case),
    )


def _health_result(data: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "ok": True, "data": data, "error": None, "elapsed_s": 0.3}


def sick_fleet() -> dict[str, Any]:
    """The run document of issue 38's fleet."""
    document = copy.deepcopy(mixed8())
    document["hosts"]["h01"]["probes"]["health"] = _health_result(case_data("h200x2"))
    document["hosts"][SICK]["probes"]["health"] = _health_result(ecc_host_health())
    document["probes"] = sorted({*document["probes"], "health"})
    return document


def write_sick_fleet(path: Path) -> Path:
    path.write_text(json.dumps(sick_fleet()))
    return path
