"""gpubench's result, from what the workers and the sampler said: torch's devices matched to
nvidia-smi's rows, each GPU's figures, every ordered pair's copy rates, and each GPU's peer
traffic with every pair active.

Not a probe (the leading underscore): a helper that probes ship (`SHIPS`) and import by module name;
the host runner serves it from memory (probes/README.md). Pure, tested in
tests/probes/test_gpubench.py. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

from _gpubench_plan import GPU_PHASES
from _pcie import bus_key

PAIR_FIGURES = {
    "pairs:one_way": "one_way",
    "pairs:both_ways": "both_ways",
    "pairs:all_active": "all_active",
}


def uuid_key(uuid: Any) -> Optional[str]:
    """torch says 'a1b2c3d4-…', nvidia-smi 'GPU-a1b2c3d4-…': the hex digits, lower case."""
    if not uuid:
        return None
    digits = re.sub(r"[^0-9a-f]", "", str(uuid).lower().replace("gpu-", "", 1))
    return digits or None


def _same_gpu(identity: Dict[str, Any], row: Dict[str, Any]) -> bool:
    same_uuid = uuid_key(identity.get("uuid")) and uuid_key(identity.get("uuid")) == uuid_key(
        row.get("uuid")
    )
    same_bus = bus_key(identity.get("pci")) and bus_key(identity.get("pci")) == bus_key(
        row.get("pci_bus_id")
    )
    return bool(same_uuid or same_bus)


def match_rows(
    identities: Dict[int, Dict[str, Any]], rows: List[Dict[str, Any]]
) -> Dict[int, Dict[str, Any]]:
    """torch's device index -> nvidia-smi's row of the same GPU: by UUID, else PCI address, else
    (the workers run with CUDA_DEVICE_ORDER=PCI_BUS_ID) by index when the counts agree."""
    found: Dict[int, Dict[str, Any]] = {}
    for cuda_index, identity in identities.items():
        for row in rows:
            if _same_gpu(identity, row):
                found[cuda_index] = row
                break
    if not found and len(rows) == len(identities):
        by_index = {row["index"]: row for row in rows}
        found = {i: by_index[i] for i in identities if i in by_index}
    return found


def _matmul_figures(results: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """{"tflops": {dtype: TFLOPS}, "matmul": {dtype: its detail}} of one GPU's matmul phases."""
    tflops: Dict[str, Any] = {}
    matmul: Dict[str, Any] = {}
    for phase, result in sorted(results.items()):
        if phase.startswith("matmul:"):
            dtype = phase.split(":", 1)[1]
            matmul[dtype] = {k: v for k, v in result.items() if k not in ("phase", "tflops")}
            if isinstance(result.get("tflops"), (int, float)):
                tflops[dtype] = result["tflops"]
    return {"tflops": tflops, "matmul": matmul}


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
    figures = _matmul_figures(results)
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
        "tflops": figures["tflops"],
        "gbps": gbps,
        "matmul": figures["matmul"],
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
    entries = []
    for src in devices:
        for dst in devices:
            if src == dst:
                continue
            key = "%d>%d" % (src, dst)
            gbps = {}
            for phase, name in PAIR_FIGURES.items():
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


def memory_used(rows: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """GPU memory in use (MiB) by nvidia-smi's index, from one sample."""
    if not rows:
        return None
    return {str(r["index"]): r.get("memory_used_mib") for r in rows}
