"""The inference pack's net-* rules and the diff on golden run documents: the real run of the lent
H200 (tests/probes/golden/net/h200_real/run_net.json), its host copied into fleets whose net
results are the probe's own reading of the golden sysfs trees (tests/probes/golden/net/), one fault
per odd host. Faults not in a capture are made here from a healthy tree and say what they change."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.facts import declared_facts
from fleet.checks import CheckReport, evaluate, host_document, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from fleet.units.net.facts import nic_gpus
from tests.probes.net_cases import (
    GOLDEN,
    NET,
    case_data,
    case_env,
    case_root,
    copy_case,
    probe_tree,
    replace_file,
)

REAL_RUN = GOLDEN / "h200_real" / "run_net.json"
NET_RULES = (
    "net-same-hcas",
    "net-same-active-ports",
    "net-same-port-rate",
    "net-same-firmware",
    "net-same-nccl-plugin",
    "net-nccl-settings-name-devices",
    "net-roce-gid-index",
    "net-gpudirect-rdma-uniform",
)
Host = dict[str, Any]


def rules() -> list[Any]:
    loaded = load_rules(pack_path("inference"), tuple(available_probes()))
    return [r for r in loaded if r.id.startswith("net-")]


def real_document() -> dict[str, Any]:
    return dict(json.loads(REAL_RUN.read_text()))


def host(net: dict[str, Any] | None) -> Host:
    """The lent H200's real host, its net result replaced (None: the real one)."""
    found: Host = copy.deepcopy(real_document()["hosts"]["local"])
    if net is not None:
        found["probes"]["net"]["data"] = net
    return found


def judge(**hosts: Host) -> CheckReport:
    document = real_document()
    document["hosts"] = hosts
    return evaluate(rules(), Run.from_dict(document))


def verdicts(report: CheckReport, name: str) -> dict[str, Any]:
    return {r.rule.id: next(v for v in r.verdicts if v.host == name) for r in report.results}


def statuses(report: CheckReport, name: str) -> dict[str, str]:
    return {rule: v.status for rule, v in verdicts(report, name).items()}


def test_every_net_rule_is_in_the_pack() -> None:
    assert tuple(r.id for r in rules()) == NET_RULES
    assert all(r.fix and r.description for r in rules())


def test_the_real_h200_without_rdma_passes_or_is_not_applicable() -> None:
    report = judge(h200=host(None))
    found = statuses(report, "h200")
    assert found["net-roce-gid-index"] == "n/a"
    assert set(found.values()) == {"pass", "n/a"}, found
    assert not report.failed


def test_a_healthy_ib_cohort_passes_every_net_rule() -> None:
    data = case_data("h100_ib8_gpud_sysfs")
    report = judge(a=host(data), b=host(data), c=host(data))
    for name in "abc":
        assert set(statuses(report, name).values()) == {"pass"}, statuses(report, name)


def test_a_host_missing_an_hca_fails_naming_the_host_and_the_devices(tmp_path: Path) -> None:
    """Made here: mlx5_4 removed from /sys/class/infiniband (its driver did not bind it)."""
    healthy = case_data("h100_ib8_gpud_sysfs")
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    shutil.rmtree(root / "sys/class/infiniband/mlx5_4")
    missing = probe_tree(root, case_env("h100_ib8_gpud_sysfs"))
    report = judge(a=host(healthy), b=host(healthy), c=host(missing))
    odd = verdicts(report, "c")
    assert odd["net-same-hcas"].status == "fail"
    assert "mlx5_4" not in odd["net-same-hcas"].observed
    assert "mlx5_4" in odd["net-same-hcas"].expected
    assert odd["net-same-hcas"].fix.startswith("c: RDMA devices mlx5_0, mlx5_1, mlx5_5,")
    assert odd["net-same-active-ports"].status == "fail"
    # NCCL_IB_HCA=... names mlx5_4 exactly: now a setting that names nothing, said so
    assert odd["net-nccl-settings-name-devices"].status == "fail"
    assert "mlx5_4 names no RDMA port here" in odd["net-nccl-settings-name-devices"].fix
    assert statuses(report, "a")["net-same-hcas"] == "pass"
    assert report.failed


def test_ports_down_fail_the_active_port_count_naming_device_and_port() -> None:
    healthy = case_data("h100_roce12_ibstat")
    down = case_data("h100_roce12_two_down_ibstat")
    report = judge(a=host(healthy), b=host(healthy), c=host(down))
    odd = verdicts(report, "c")
    assert odd["net-same-active-ports"].status == "fail"
    assert (odd["net-same-active-ports"].observed, odd["net-same-active-ports"].expected) == (
        10,
        12,
    )
    assert (
        "not active here: mlx5_5/1: DOWN (Disabled), mlx5_11/1: DOWN (Polling)"
        in odd["net-same-active-ports"].fix
    )
    # the same rates where up, the same firmware, the same HCAs: only the count fails
    assert statuses(report, "c") == {
        **dict.fromkeys(NET_RULES, "pass"),
        "net-same-active-ports": "fail",
    }


def test_a_port_at_a_lower_rate_fails_and_the_fix_lists_the_port(tmp_path: Path) -> None:
    """Made here: mlx5_6's port trained at 200 Gb/s (4X HDR) instead of NDR."""
    healthy = case_data("h100_ib8_gpud_sysfs")
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    replace_file(root / "sys/class/infiniband/mlx5_6/ports/1/rate", "200 Gb/sec (4X HDR)")
    slow = probe_tree(root, case_env("h100_ib8_gpud_sysfs"))
    report = judge(a=host(healthy), b=host(healthy), c=host(slow))
    odd = verdicts(report, "c")["net-same-port-rate"]
    assert odd.status == "fail"
    assert "200 Gb/sec (4X HDR)" in odd.observed
    assert "mlx5_6/1=200 Gb/sec (4X HDR)" in odd.fix


def test_other_firmware_on_one_device_warns_naming_the_device(tmp_path: Path) -> None:
    """Made here: mlx5_7 on the firmware of the other gpud capture (28.39.1002)."""
    healthy = case_data("h100_ib8_gpud_sysfs")
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    replace_file(root / "sys/class/infiniband/mlx5_7/fw_ver", "28.39.1002")
    older = probe_tree(root, case_env("h100_ib8_gpud_sysfs"))
    report = judge(a=host(healthy), b=host(healthy), c=host(older))
    odd = verdicts(report, "c")["net-same-firmware"]
    assert odd.status == "fail"
    assert odd.observed == {"mlx5_7": "28.39.1002"}
    assert odd.expected == {"mlx5_7": "28.41.1000"}
    assert not report.failed  # a warning


def test_a_plugin_on_some_hosts_only_fails_those_without_it() -> None:
    """The p4d case with and without LD_LIBRARY_PATH reaching aws-ofi-nccl (NVIDIA/nccl#1634)."""
    with_plugin = case_data("p4d_efa4")
    env = {k: v for k, v in case_env("p4d_efa4").items() if k != "LD_LIBRARY_PATH"}
    without = case_data("p4d_efa4", env)
    report = judge(a=host(with_plugin), b=host(with_plugin), c=host(without))
    odd = verdicts(report, "c")
    assert odd["net-same-nccl-plugin"].status == "fail"
    assert odd["net-same-nccl-plugin"].observed == "none: NCCL's internal IB and Socket transports"
    assert odd["net-same-nccl-plugin"].expected == (
        "aws-ofi-nccl 1.14.2 at /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
    )
    # and NCCL_NET="AWS Libfabric" there names a plugin NCCL does not load
    assert odd["net-nccl-settings-name-devices"].status == "fail"
    assert statuses(report, "a")["net-same-nccl-plugin"] == "pass"


def test_an_nccl_ib_hca_naming_nothing_fails_with_the_names() -> None:
    data = case_data("h100_ib8_gpud_sysfs", {"NCCL_IB_HCA": "mlx5_0,mlx5_12:1"})
    verdict = verdicts(judge(a=host(data)), "a")["net-nccl-settings-name-devices"]
    assert verdict.status == "fail"
    assert verdict.observed == [
        "NCCL_IB_HCA=mlx5_0,mlx5_12:1 (environment): mlx5_12:1 names no RDMA port here (RDMA"
        " ports here: mlx5_0/1, mlx5_1/1, mlx5_4/1, mlx5_5/1, mlx5_6/1, mlx5_7/1, mlx5_8/1,"
        " mlx5_9/1, mlx5_bond_0/1)"
    ]


def test_a_wrong_gid_index_fails_naming_each_port() -> None:
    bad = case_data("roce4_gid_nccl1538")  # NCCL_IB_GID_INDEX=3: empty on all four
    good = case_data("roce4_gid_nccl1538", {"NCCL_IB_GID_INDEX": "7"})
    report = judge(bad=host(bad), good=host(good))
    verdict = verdicts(report, "bad")["net-roce-gid-index"]
    assert verdict.status == "fail"
    assert [line.split(":")[0] for line in verdict.observed] == [
        "mlx5_0/1",
        "mlx5_1/1",
        "mlx5_2/1",
        "mlx5_3/1",
    ]
    assert "GID index 3 is empty" in verdict.fix
    assert statuses(report, "good")["net-roce-gid-index"] == "pass"
    v1 = case_data("roce4_gid_nccl1538", {"NCCL_IB_GID_INDEX": "6"})
    assert "is RoCE v1, not RoCE v2" in verdicts(judge(a=host(v1)), "a")["net-roce-gid-index"].fix


def test_gpudirect_on_some_hosts_only_warns_the_odd_one(tmp_path: Path) -> None:
    """Made here: nvidia_peermem not loaded on one host (the driver is proprietary 535, kernel
    5.15: no dma-buf either)."""
    healthy = case_data("h100_ib8_gpud_sysfs")
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    modules = (root / "proc/modules").read_text().splitlines()
    (root / "proc/modules").write_text("\n".join(m for m in modules if "peermem" not in m))
    shutil.rmtree(root / "sys/module/nvidia_peermem")
    without = probe_tree(root, case_env("h100_ib8_gpud_sysfs"))
    report = judge(a=host(healthy), b=host(healthy), c=host(without))
    odd = verdicts(report, "c")["net-gpudirect-rdma-uniform"]
    assert (odd.status, odd.observed, odd.expected) == ("fail", False, True)
    assert "nvidia_peermem is not loaded" in odd.fix


def test_unreadable_devices_are_unknown_never_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = case_data("h100_ib8_gpud_sysfs")
    listdir = os.listdir

    def refuse(path: Any) -> list[str]:
        if str(path).endswith("sys/class/infiniband"):
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)

    monkeypatch.setattr(NET.os, "listdir", refuse)
    unreadable = probe_tree(case_root("h100_ib8_gpud_sysfs"), case_env("h100_ib8_gpud_sysfs"))
    monkeypatch.undo()
    report = judge(a=host(healthy), b=host(healthy), c=host(unreadable))
    found = statuses(report, "c")
    assert found == {
        "net-same-hcas": "unknown",
        "net-same-active-ports": "unknown",
        "net-same-port-rate": "unknown",
        "net-same-firmware": "unknown",
        "net-same-nccl-plugin": "pass",  # read from the filesystem, not from sysfs
        "net-nccl-settings-name-devices": "unknown",
        "net-roce-gid-index": "unknown",
        "net-gpudirect-rdma-uniform": "unknown",
    }


def test_a_failed_net_probe_skips_its_rules() -> None:
    broken = host(None)
    broken["probes"]["net"].update(status="failed", ok=False, error="boom")
    assert set(statuses(judge(h=broken), "h").values()) == {"skipped"}


# ---------------------------------------------------------------- the diff


def test_the_diff_names_the_missing_hca_and_the_plugin_on_some_hosts(tmp_path: Path) -> None:
    healthy = case_data("p4d_efa4")
    root = copy_case("p4d_efa4", tmp_path)
    shutil.rmtree(root / "sys/class/infiniband/rdmap144s27")
    env = {k: v for k, v in case_env("p4d_efa4").items() if k != "LD_LIBRARY_PATH"}
    odd = probe_tree(root, env)
    document = real_document()
    document["hosts"] = {"a": host(healthy), "b": host(healthy), "c": host(odd)}
    diff = compare_hosts(Run.from_dict(document).hosts.values(), declared_facts())
    hcas = next(s for s in diff.sets if s.fact == "net.rdma.hcas")
    assert hcas.missing == (("rdmap144s27", ("c",)),)
    plugin = next(d for d in diff.values if d.fact == "net.nccl_plugins.in_use")
    assert plugin.majority_hosts == ("a", "b")
    assert plugin.others == (("none: NCCL's internal IB and Socket transports", ("c",)),)
    facts = {d.fact for d in diff.values} | {s.fact for s in diff.sets}
    # identity and volatile fields are never divergence
    assert not any(".gids" in f or "node_guid" in f or "timings_s" in f for f in facts)
    assert not any(f.startswith("net.nccl_plugins.loads") for f in facts)  # once, as in_use
    (finding,) = diff.findings
    assert finding.hosts == ("c",)
    assert {"net.rdma.hcas", "net.nccl_plugins.in_use", "net.rdma.active_ports"} <= set(
        finding.facts
    )


# ---------------------------------------------------------------- NICs and their nearest GPUs

# nvidia-smi topo -m of an 8-GPU H100 with 8 NICs (tests/probes/golden/gpu/h100x8_nvlink_nics,
# vLLM issue 25994), its rows cut after NIC4 in our copy; the NIC legend is made up here.
H100_TOPOLOGY: dict[str, Any] = {
    "devices": [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(8)],
    "matrix": [
        ["X"] + ["NV18"] * 7 + ["PIX", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"],
        ["NV18", "X"] + ["NV18"] * 6 + ["PIX", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"],
        ["NV18"] * 2
        + ["X"]
        + ["NV18"] * 5
        + ["NODE", "NODE", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS"],
        ["NV18"] * 3
        + ["X"]
        + ["NV18"] * 4
        + ["NODE", "NODE", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS"],
        ["NV18"] * 4
        + ["X"]
        + ["NV18"] * 3
        + ["SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "NODE", "NODE"],
        ["NV18"] * 5
        + ["X"]
        + ["NV18"] * 2
        + ["SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "NODE", "NODE"],
        ["NV18"] * 6
        + ["X"]
        + ["NV18"]
        + ["SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "PIX"],
        ["NV18"] * 7 + ["X"] + ["SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "PIX"],
    ],
    "numa_affinity": {f"GPU{i}": str(i // 4) for i in range(8)},
    "nics": {
        f"NIC{i}": name
        for i, name in enumerate(
            ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
        )
    },
}


def test_nics_join_their_nearest_gpus_through_the_topology_else_the_numa_node() -> None:
    net = case_data("h100_ib8_gpud_sysfs")
    found = nic_gpus(net, {"topology": H100_TOPOLOGY})
    assert found is not None
    assert found["mlx5_0"] == {
        "gpus": ["GPU0", "GPU1"],
        "link": "PIX",
        "basis": "nvidia-smi topo -m",
    }
    assert found["mlx5_9"]["gpus"] == ["GPU6", "GPU7"]
    # mlx5_bond_0 has no column: its NUMA node (0) against the GPUs' NUMA affinity
    assert found["mlx5_bond_0"] == {
        "gpus": ["GPU0", "GPU1", "GPU2", "GPU3"],
        "link": "NUMA node 0",
        "basis": "NUMA node",
    }
    # without the gpu probe nothing can be told: null, not "no GPU"
    assert nic_gpus(net, None)["mlx5_0"] == {"gpus": None, "link": None, "basis": None}  # type: ignore[index]
    assert nic_gpus({"rdma": {"devices": None}}, None) is None


def test_rules_read_the_join_as_nic_gpus() -> None:
    data = host(case_data("h100_ib8_gpud_sysfs"))
    data["probes"]["gpu"]["data"]["topology"] = H100_TOPOLOGY
    document = real_document()
    document["hosts"] = {"a": data}
    outcome = Run.from_dict(document).hosts["a"]
    joined = host_document(outcome)["_nic_gpus"]
    assert joined["mlx5_4"]["gpus"] == ["GPU2", "GPU3"]
    assert host_document(Run.from_dict(real_document()).hosts["local"])["_nic_gpus"] == {}
