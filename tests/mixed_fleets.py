"""Run documents of mixed fleets, built from recorded runs (tests, bench/diff_scale.py).

- `mixed8()`: the recorded 8-host loopback run of two kinds of machine
  (tests/probes/golden/real_run/mixed8_loopback.json, bench/mixed_fleet.py): h01-h02 2× H200,
  h03-h08 8× RTX PRO 6000 Blackwell (replayed nvidia-smi captures, stub torch); h05's torch 2.6
  lacks sm_120, h07 sets NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree.
- `real_h200_with_blackwell()`: the real 2× H200 host (h200x2_run.json, a lent machine, every probe
  with real data) twice, beside the six Blackwell hosts of mixed8: two stacks that really differ in
  software too (Python, OS, torch builds, dir() names), as a pool bought a year apart does.
- `mixed_fleet(count)`: `count` hosts made of mixed8's own (a quarter H200, the rest Blackwell),
  each with its own hostname and GPU UUIDs; 2 hosts without sm_120, 2 with NCCL_P2P_DISABLE=1.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.paths import ROOT

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"
MIXED8 = REAL_RUN / "mixed8_loopback.json"
H200X2 = REAL_RUN / "h200x2_run.json"


def mixed8() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(MIXED8.read_text())
    return document


def renamed(host: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of a host's outcome as another machine of its kind reports it."""
    other = copy.deepcopy(host)
    other["address"] = name
    probes = other["probes"]
    if "system" in probes:
        probes["system"]["data"]["hostname"] = name
    for gpu in (probes.get("gpu") or {}).get("data", {}).get("gpus") or []:
        gpu["uuid"] = f"GPU-{name}-{gpu.get('index')}"
    return dict(other)


def real_h200_with_blackwell() -> dict[str, Any]:
    real = json.loads(H200X2.read_text())
    document = mixed8()
    template = real["hosts"]["local"]
    template["probes"].pop("allreduce", None)  # mixed8 ran --no-allreduce
    hosts = {name: renamed(template, name) for name in ("h01", "h02")}
    hosts.update({k: v for k, v in document["hosts"].items() if k not in hosts})
    return {**document, "hosts": hosts}


def mixed_fleet(count: int) -> dict[str, Any]:
    document = mixed8()
    source = document["hosts"]
    kinds = {"h200": source["h01"], "blackwell": source["h03"]}
    odd = {"no-sm120": source["h05"], "p2p-off": source["h07"]}
    hosts = {}
    for index in range(count):
        name = f"gpu-{index:04d}"
        if index in (7, count // 2):
            template = odd["no-sm120"]
        elif index in (8, count // 2 + 1):
            template = odd["p2p-off"]
        else:
            template = kinds["h200"] if index % 4 == 0 else kinds["blackwell"]
        hosts[name] = renamed(template, name)
    return {**document, "hosts": hosts}
