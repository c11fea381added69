"""The report's GPU health section, on the real single-H200 run and on faults made from it."""

from __future__ import annotations

import copy
import json
from typing import Any

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from fleet.render.html.page import Report, render_html
from fleet.units.health.html import health_section
from tests.conftest import ROOT

REAL_H200X1 = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x1_health_run.json"


def fleet_of(count: int) -> dict[str, Any]:
    """`count` copies of the real host, named gpu-001…"""
    real = json.loads(REAL_H200X1.read_text())
    host = real["hosts"].pop("local")
    real["hosts"] = {f"gpu-{i:03d}": copy.deepcopy(host) for i in range(1, count + 1)}
    return real


def gpu0(document: dict[str, Any], name: str) -> dict[str, Any]:
    gpu: dict[str, Any] = document["hosts"][name]["probes"]["health"]["data"]["gpus"][0]
    return gpu


def page_of(document: dict[str, Any]) -> str:
    run = Run.from_dict(document)
    diff = compare_hosts(run.hosts.values(), declared_facts())
    return render_html(Report(run=run, diff=diff))


def test_healthy_hosts_fold_into_one_row_and_the_sick_ones_stand_out_first() -> None:
    document = fleet_of(40)
    gpu0(document, "gpu-007")["ecc"]["volatile"]["uncorrected"] = 2
    gpu0(document, "gpu-007")["pcie"]["width"] = 8
    gpu0(document, "gpu-031")["clock_events"]["active"] = ["hw_slowdown", "hw_power_brake_slowdown"]
    section = health_section(list(Run.from_dict(document).hosts.values()))
    assert section is not None
    rows = section.split("<tr")[2:]  # past the header row
    assert len(rows) == 3
    assert "gpu-007" in rows[0] or "gpu-007" in rows[1]
    sick = "".join(rows[:2])
    assert "ECC uncorrected 2; PCIe x8 of x16" in sick
    assert "slowed: hw_slowdown, hw_power_brake_slowdown" in sick
    assert "gpu-[001-006,008-030,032-040]" in rows[2]
    assert "ok · PCIe Gen5 x16" in rows[2]
    assert "chip bad" not in rows[2]


def test_the_page_has_the_section_in_its_nav_and_says_what_the_kernel_log_holds() -> None:
    document = fleet_of(2)
    log = document["hosts"]["gpu-002"]["probes"]["health"]["data"]["kernel_log"]
    log["xid_counts"] = {"79": 1}
    page = page_of(document)
    assert '<a href="#health">GPU health</a>' in page
    assert "XID 79×1" in page
    assert "no XID" in page


def test_a_run_without_the_health_probe_has_no_section() -> None:
    document = fleet_of(2)
    for host in document["hosts"].values():
        del host["probes"]["health"]
    assert 'href="#health"' not in page_of(document)
