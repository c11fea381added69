"""The report's network section: the real H200 run (no RDMA) and fleets whose net results are the
probe's reading of the golden sysfs trees (tests/probes/golden/net/)."""

from __future__ import annotations

import copy
import json
from typing import Any

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from fleet.render.html.page import Report, render_html
from fleet.units.net.html import net_section
from tests.probes.net_cases import GOLDEN, case_data

REAL_RUN = GOLDEN / "h200_real" / "run_net.json"


def fleet_of(**nets: dict[str, Any] | None) -> dict[str, Any]:
    """The real H200 host under each name, its net data replaced where given."""
    document: dict[str, Any] = json.loads(REAL_RUN.read_text())
    real = document["hosts"].pop("local")
    for name, net in nets.items():
        host = copy.deepcopy(real)
        if net is not None:
            host["probes"]["net"]["data"] = net
        document["hosts"][name] = host
    return document


def page_of(document: dict[str, Any]) -> str:
    run = Run.from_dict(document)
    return render_html(Report(run=run, diff=compare_hosts(run.hosts.values(), declared_facts())))


def section_of(document: dict[str, Any]) -> str:
    section = net_section(list(Run.from_dict(document).hosts.values()))
    assert section is not None
    return section


def test_hosts_without_rdma_read_as_one_row() -> None:
    section = section_of(fleet_of(**{f"h{i}": None for i in range(1, 5)}))
    assert section.count("<tr data-key") == 1
    assert "h[1-4]" in section
    assert "no RDMA devices" in section
    assert '<a href="#network">network</a>' in page_of(fleet_of(a=None, b=None))


def test_ports_down_and_a_missing_plugin_stand_out_first() -> None:
    healthy = case_data("h100_roce12_ibstat")
    down = case_data("h100_roce12_two_down_ibstat")
    section = section_of(fleet_of(a=healthy, b=healthy, c=down))
    rows = section.split("<tr data-key")[1:]
    assert rows[0].startswith('="c"')  # the odd host first
    assert "DOWN (Disabled)" in rows[0]
    assert "DOWN (Polling)" in rows[0]
    assert "a,b <span class=dim>(2)</span>" in rows[1]
    header = section.split("</thead>")[0]
    assert header.index("mlx5_2/1") < header.index("mlx5_10/1")  # natural order
    assert "ACTIVE 400 Gb/s Ethernet" in rows[1]


def test_a_device_a_host_lacks_is_missing_and_settings_naming_nothing_are_named() -> None:
    healthy = case_data("p4d_efa4")
    odd = case_data("p4d_efa4", {"NCCL_IB_HCA": "mlx5"})
    odd["rdma"]["devices"].pop("rdmap144s27")
    section = section_of(fleet_of(a=healthy, b=odd))
    row_b = next(r for r in section.split("<tr data-key")[1:] if r.startswith('="b"'))
    assert "missing" in row_b
    assert "NCCL_IB_HCA=mlx5" in row_b
    assert "aws-ofi-nccl 1.14.2" in section
    assert "yes (dma-buf)" in section


def test_a_run_without_the_net_probe_has_no_section() -> None:
    document = fleet_of(a=None)
    for host in document["hosts"].values():
        del host["probes"]["net"]
    assert 'href="#network"' not in page_of(document)
