"""The hardware's expected band without a baseline (fleet/units/allreduce/linerate.py): bus bandwidth as a
share of the line rate (NVLink generation × links, PCIe generation × lanes), with what NCCL chose."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fleet.api import baselines
from fleet.models import Run
from fleet.units.allreduce.linerate import host_line_rate, line_rate
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "probes" / "golden"
PLAIN = GOLDEN / "real_run" / "h200x2_run.json"
MATRIX = GOLDEN / "real_run" / "h200x2_matrix_run.json"


def real() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(PLAIN.read_text())
    return loaded


def gpu_of(document: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = document["hosts"]["local"]["probes"]["gpu"]["data"]
    return data


def test_the_h200s_nvlink_is_18_links_of_nvlink_4_and_the_real_run_reaches_two_thirds() -> None:
    rate, why = line_rate(gpu_of(real()))
    assert rate is not None
    assert (rate.gbps, rate.basis, why) == (450.0, "NVLink 4 × 18 links × 25 GB/s", "")
    found = host_line_rate(Run.from_dict(real()).hosts["local"])
    assert found is not None
    assert found.busbw == {"eager": (256 << 20, 300.968), "graph": (256 << 20, 301.246)}
    assert found.percent("eager") == pytest.approx(66.9, abs=0.05)
    assert found.nccl_choice.startswith("NCCL's algorithm not recorded")


def test_pcie_is_its_generation_times_its_lanes_the_slowest_gpu_wins() -> None:
    gpu = copy.deepcopy(gpu_of(real()))
    gpu["interconnect"] = "pcie"
    rate, _ = line_rate(gpu)
    assert rate is not None
    assert (rate.gbps, rate.basis) == (pytest.approx(63.008), "PCIe 5 x16 × 3.938 GB/s")
    gpu["gpus"][1]["pcie_width_max"] = 8  # one GPU in a x8 slot
    rate, _ = line_rate(gpu)
    assert rate is not None
    assert rate.basis == "PCIe 5 x8 × 3.938 GB/s"


def test_what_cannot_be_known_is_said() -> None:
    capture = json.loads((GOLDEN / "gpu" / "rtxpro6000x8_pcie" / "expected.json").read_text())
    assert line_rate(capture["probe_data"]) == (
        None,
        "the gpu probe did not read the PCIe generation and width",
    )
    gpu = copy.deepcopy(gpu_of(real()))
    gpu["gpus"][0]["compute_capability"] = "7.5"
    assert line_rate(gpu) == (None, "no NVLink rate known for compute capability 7.5")
    gpu["interconnect"] = None
    assert line_rate(gpu) == (None, "interconnect not known: no line rate")
    matrix_run = Run.from_dict(json.loads(MATRIX.read_text()))  # -p allreduce: no gpu probe
    found = host_line_rate(matrix_run.hosts["local"])
    assert found is not None
    assert (found.rate, found.why_not) == (None, "no gpu probe data: no line rate")


def test_what_nccl_chose_the_hosts_setting_else_the_matrix_variant_nearest_its_default() -> None:
    matrix_run = Run.from_dict(json.loads(MATRIX.read_text()))
    found = host_line_rate(matrix_run.hosts["local"])
    assert found is not None
    # nccl:default 300 GB/s at 256 MiB eager; Ring/Simple 301.3 and Tree/Simple 310.7 are within 5%
    assert found.nccl_choice == (
        "NCCL's default timed like Ring/Simple or Tree/Simple at eager 256 MiB (matrix)"
    )
    document = real()
    document["hosts"]["local"]["probes"]["nccl"]["data"]["env"]["NCCL_ALGO"] = "Tree"
    set_here = host_line_rate(Run.from_dict(document).hosts["local"])
    assert set_here is not None
    assert set_here.nccl_choice == "set on the host: NCCL_ALGO=Tree"


def test_line_rates_are_grouped_by_cohort() -> None:
    (cohort,) = baselines.line_rates(Run.from_dict(real()))
    assert cohort.cohort == "2× H200"
    assert cohort.median_percent("graph") == pytest.approx(66.9, abs=0.05)
    document = cohort.to_dict()
    assert document["line_rate_gbps"] == 450.0
    assert document["hosts"]["local"]["modes"]["eager"]["percent"] == 66.9
