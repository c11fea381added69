"""A real run document from the 2× H200 machine: the data contract of every probe, and what the
diff makes of two identical hosts (only identities and timings differ: no divergence)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from tests.conftest import ROOT
from tests.recorded import CONTRACT

REAL = ROOT / "tests" / "probes" / "golden" / "real_run"
GPU_FIELDS = {
    "index",
    "name",
    "uuid",
    "pci_bus_id",
    "compute_capability",
    "memory_mib",
    "pcie_gen",
    "pcie_width",
    "pcie_gen_max",
    "pcie_width_max",
    "persistence_mode",
    "mig_mode",
}


def real_document() -> dict[str, Any]:
    return dict(json.loads((REAL / "h200x2_run.json").read_text()))


@pytest.mark.parametrize("probe", sorted(CONTRACT))
def test_every_probe_returned_real_data_with_its_contract_fields(probe: str) -> None:
    result = real_document()["hosts"]["local"]["probes"][probe]
    assert result["status"] == "ok", result["error"]
    assert CONTRACT[probe] <= set(result["data"])


def test_gpu_and_torch_facts_of_the_h200_machine() -> None:
    probes = real_document()["hosts"]["local"]["probes"]
    gpu, torch = probes["gpu"]["data"], probes["torch"]["data"]
    assert gpu["interconnect"] == "nvlink"
    assert len(gpu["gpus"]) == 2
    assert set(gpu["gpus"][0]) >= GPU_FIELDS
    assert gpu["gpus"][0]["compute_capability"] == "9.0"
    assert gpu["topology"]["matrix"][0][1] == "NV18"
    assert [d["arch_supported"] for d in torch["devices"]] == [True, True]
    symm = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"
    resolved = probes["imports"]["data"]["results"][symm]["resolved"]
    assert resolved == "torch.distributed._symmetric_memory:_SymmetricMemory"


def test_allreduce_rows_follow_nccl_tests_definitions() -> None:
    data = real_document()["hosts"]["local"]["probes"]["allreduce"]["data"]
    n = data["world_size"]
    for row in data["results"]:
        assert row["correct"] is True
        algbw = row["bytes"] / (row["latency_us"] * 1e-6) / 1e9
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-3)
        assert row["busbw_gbps"] == pytest.approx(algbw * 2 * (n - 1) / n, rel=1e-3)
    assert {row["mode"] for row in data["results"]} == {"eager", "graph"}


def twin(document: dict[str, Any]) -> dict[str, Any]:
    """The same host again, as another machine of the same kind would report it."""
    other = copy.deepcopy(document["hosts"]["local"])
    other["probes"]["system"]["data"]["hostname"] = "twin"
    for index, gpu in enumerate(other["probes"]["gpu"]["data"]["gpus"]):
        gpu["uuid"] = f"GPU-twin-{index}"
    for result in other["probes"].values():
        result["elapsed_s"] *= 1.5
    for row in other["probes"]["allreduce"]["data"]["results"]:
        row["iterations"] = 20  # the probe fits its iterations to the time budget
        row["latency_us"] *= 1.1
        row["algbw_gbps"] /= 1.1
        row["busbw_gbps"] /= 1.1
    return other


def test_identical_twin_hosts_show_no_divergence() -> None:
    document = real_document()
    document["hosts"]["twin"] = twin(document)
    run = Run.from_dict(document)
    assert compare_hosts(run.hosts.values(), declared_facts()).clean


def test_a_changed_torch_on_the_twin_is_the_one_divergence() -> None:
    document = real_document()
    document["hosts"]["twin"] = twin(document)
    document["hosts"]["twin"]["probes"]["torch"]["data"]["version"] = "2.9.1+cu128"
    diff = compare_hosts(Run.from_dict(document).hosts.values(), declared_facts())
    [divergence] = diff.values
    assert diff.sets == ()
    assert diff.outliers == ()
    assert divergence.fact == "torch.version"
    assert divergence.others[0][1] in (("twin",), ("local",))


def test_run_document_round_trips(tmp_path: Path) -> None:
    run = Run.from_dict(real_document())
    assert Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
