"""`-p health` on a mixed fleet (issue 46, item 8): the health probe's GPU names, count and
interconnect make the cohorts when the gpu probe did not run, so two H200 hosts among Tesla M10
hosts are a cohort of their own, not odd hosts told to match the others; and the hardware facts
health reads (GPU count, names, VBIOS, power limit, ECC mode, …) differ between cohorts as
hardware, not software. Real captures (tests/probes/golden/health/)."""

from __future__ import annotations

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_hosts.findings import COHORT
from fleet.analysis.facts import declared_facts
from fleet.models import HostOutcome, ProbeResult
from tests.probes.health_cases import case_data

HARDWARE = (
    "health.gpu_count",
    "length(health.gpus)",
    "health.gpus[0].name",
    "health.gpus[0].vbios",
    "health.gpus[0].power.limit_w",
    "health.gpus[0].ecc.mode",
)


def health_only(**cases: str) -> list[HostOutcome]:
    return [
        HostOutcome(
            name,
            "ok",
            name,
            probes={"health": ProbeResult("ok", True, case_data(case), None, 0.1)},
        )
        for name, case in cases.items()
    ]


def test_health_alone_groups_unlike_gpus_apart_and_counts_their_hardware_as_such() -> None:
    outcomes = health_only(
        a01="h200x2",
        a02="h200x2",
        b01="m10x4_gen1_x8_itnovum",
        b02="m10x4_gen1_x8_itnovum",
        b03="m10x4_gen1_x8_itnovum",
    )
    diff = compare_hosts(outcomes, declared_facts())
    assert {c.name: c.hosts for c in diff.cohorts} == {
        "4× Tesla M10 · ?": ("b01", "b02", "b03"),
        "2× NVIDIA H200 · nvlink": ("a01", "a02"),
    }
    assert not [f for f in diff.findings if f.rank <= COHORT]  # nobody told to match the M10s
    between = {v.fact: v for v in diff.values if v.between}
    for fact in HARDWARE:
        assert between[fact].hardware, fact
