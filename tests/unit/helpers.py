"""Helpers of the unit tests: the rule engine on the inference pack, and hand-made host outcomes
for the diff and drift."""

from __future__ import annotations

from typing import Any

from fleet.checks import CheckReport, load_rules, pack_path, parse_rules
from fleet.execution.bundle import available_probes
from fleet.models import HostOutcome, ProbeResult

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
