"""Helpers of the unit tests: the rule engine on the inference pack, and hand-made host outcomes
for the diff and drift."""

from __future__ import annotations

import copy
import json
import random
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from fleet.checks import CheckReport, load_rules, pack_path, parse_rules
from fleet.execution.bundle import available_probes
from fleet.models import HostOutcome, ProbeResult, Run
from fleet.store import read_run_file, save_run
from tests.conftest import ROOT

PROBES = tuple(available_probes())


def pack_rules() -> list[Any]:
    """The pack without its health rules: the recorded run predates the health probe (those
    rules are tested on run documents built from its captures: tests/unit/test_check_health.py)."""
    loaded = load_rules(pack_path("inference"), PROBES)
    return [rule for rule in loaded if not rule.id.startswith("health-")]


def failures(report: CheckReport) -> set[tuple[str, str]]:
    return {(r.rule.id, v.host) for r in report.results for v in r.failures}


def verdict(report: CheckReport, rule_id: str, host: str) -> Any:
    result = next(r for r in report.results if r.rule.id == rule_id)
    return next(v for v in result.verdicts if v.host == host)


def rules(text: str, path: str = "rules.yaml") -> list[Any]:
    return parse_rules(text, path, PROBES)


def host(name: str, status: str = "ok", **probes: dict[str, Any]) -> HostOutcome:
    results = {p: ProbeResult("ok", True, data, None, 0.1) for p, data in probes.items()}
    return HostOutcome(name=name, status=status, address=name, probes=results)


def gpu(model: str = "NVIDIA H200", count: int = 2, link: str = "nvlink") -> dict[str, Any]:
    gpus = [
        {"index": i, "name": model, "uuid": f"GPU-{model}-{i}-{id(object())}"} for i in range(count)
    ]
    return {"gpus": gpus, "gpu_count": count, "interconnect": link}


def allreduce(small_us: float, large_busbw: float) -> dict[str, Any]:
    return {
        "backend": "nccl",
        "results": [
            {"mode": "eager", "bytes": 8, "latency_us": small_us, "busbw_gbps": 0.0},
            {"mode": "eager", "bytes": 1 << 28, "latency_us": 900.0, "busbw_gbps": large_busbw},
        ],
    }


REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"


def templates() -> list[dict[str, Any]]:
    loopback = json.loads((REAL_RUN / "loopback8_two_odd.json").read_text())
    h200 = json.loads((REAL_RUN / "h200x2_run.json").read_text())
    return [h200["hosts"]["local"], *loopback["hosts"].values()]


def fleet_run(count: int, folder: Path, seed: int = 1) -> Run:
    """`count` hosts, each a captured one with its own identity and timings, saved and read."""
    rng = random.Random(seed)
    sources = templates()
    hosts = {}
    for index in range(count):
        name = f"gpu-{index:05d}"
        host = copy.deepcopy(sources[index % len(sources)])
        host["address"] = f"10.0.{index // 256}.{index % 256}"
        host["elapsed_s"] = round(rng.uniform(5, 15), 3)
        for probe, result in host["probes"].items():
            result["elapsed_s"] = round(rng.uniform(0.1, 2), 3)
            if probe == "system":
                result["data"]["hostname"] = name
            if probe == "gpu":
                for gpu in result["data"].get("gpus") or []:
                    gpu["uuid"] = f"GPU-{index:06d}-{gpu['index']}"
                    gpu["serial"] = f"{1650000000000 + index * 16 + gpu['index']}"
            if probe == "allreduce":
                result["data"]["elapsed_s"] = round(rng.uniform(9, 11), 3)
        hosts[name] = host
    return saved_run(hosts, folder, seed)


def saved_run(hosts: dict[str, Any], folder: Path, seed: int = 1) -> Run:
    """A run of `hosts` (name → host document), saved in `folder` and read back."""
    document = {
        "schema": "fleet.run/2",
        "fleet_version": "test",
        "started": f"2026-12-01T10:00:0{seed}.000Z",
        "finished": "",
        "bundle_sha256": "0" * 64,
        "inventory": "scale.yaml",
        "probes": sorted({p for h in hosts.values() for p in h["probes"]}),
        "interrupted": False,
        "hosts": hosts,
    }
    return read_run_file(save_run(Run.from_dict(document), folder))


@contextmanager
def calls() -> Iterator[Counter[str]]:
    """Every Python function called meanwhile, counted by name."""
    counted: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            counted[frame.f_code.co_name] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counted
    finally:
        sys.setprofile(previous)


def real_gpu_payload() -> dict[str, Any]:
    run = json.loads((REAL_RUN / "mixed8_loopback.json").read_text())
    data: dict[str, Any] = run["hosts"]["h01"]["probes"]["gpu"]["data"]
    return data


def with_identity(payload: dict[str, Any], host: int) -> dict[str, Any]:
    """The payload as host number `host` reports it: its GPUs' own UUIDs and serials."""
    own = copy.deepcopy(payload)
    for gpu in own["gpus"]:
        gpu["uuid"] = f"GPU-{host:06d}-{gpu['index']:02d}-4a1e"
        gpu["serial"] = f"{1650000000000 + host * 16 + gpu['index']}"
    return own
