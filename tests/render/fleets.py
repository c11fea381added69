"""Run documents for the HTML report's tests, built from real recorded runs.

`loopback8_with_allreduce()`: the recorded 8-host loopback run (gpu-07 has only `_SymmetricMemory`,
gpu-08 sets NCCL_P2P_DISABLE=1; tests/probes/golden/real_run/SOURCE.md) given the real 2×H200
allreduce payload on every host, jittered by ±4%; gpu-08, whose NCCL_P2P_DISABLE=1 sends the
traffic through host memory, is made 3× slower, as such a host is.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from tests.conftest import ROOT

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"
LOOPBACK8 = REAL_RUN / "loopback8_two_odd.json"
H200X2 = REAL_RUN / "h200x2_run.json"
SLOW_HOST, SLOWDOWN = "gpu-08", 3.0


def loopback8() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(LOOPBACK8.read_text())
    return document


def allreduce_payload() -> dict[str, Any]:
    document = json.loads(H200X2.read_text())
    payload: dict[str, Any] = document["hosts"]["local"]["probes"]["allreduce"]
    return payload


def loopback8_with_allreduce(seed: int = 8) -> dict[str, Any]:
    rng = random.Random(seed)
    document = loopback8()
    template = allreduce_payload()
    for name, host in document["hosts"].items():
        payload = copy.deepcopy(template)
        for row in payload["data"]["results"]:
            factor = rng.uniform(0.96, 1.04) * (SLOWDOWN if name == SLOW_HOST else 1.0)
            row["latency_us"] *= factor
            row["busbw_gbps"] /= factor
            row["algbw_gbps"] /= factor
        host["probes"]["allreduce"] = payload
    document["probes"] = sorted([*document["probes"], "allreduce"])
    return document
