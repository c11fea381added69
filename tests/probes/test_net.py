"""The net probe: its parsers, the real probe code run on the golden sysfs trees (built by
tests/probes/net_trees.py from public captures, see golden/net/SOURCE.md), its resolution of NCCL's
settings and plugins, and the probe run by hand on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.probes import net_trees
from tests.probes.handrun import run_by_hand
from tests.probes.net_cases import (
    CASES,
    GOLDEN,
    KERNEL,
    NET,
    PLUGIN,
    RDMA,
    SETTINGS,
    case_data,
    case_root,
    copy_case,
    probe_tree,
)
from tests.probes.ships import helpers_imported

# ---------------------------------------------------------------- the golden trees


@pytest.mark.parametrize("name", CASES)
def test_the_builder_makes_the_same_tree_every_time(name: str, tmp_path: Path) -> None:
    net_trees.build(name, tmp_path / "root")
    assert list(net_trees.tree_files(tmp_path / "root")) == list(
        net_trees.tree_files(case_root(name))
    )


@pytest.mark.parametrize("name", CASES)
def test_the_tree_has_no_link_loops(name: str) -> None:
    """Whatever follows links through a tree ends (pytest's collection, find -L, copytree): no
    folder is reached through a link back to one of the folders above it."""
    root = case_root(name)
    for folder, _, _ in os.walk(root, followlinks=True):
        relative = Path(folder).relative_to(root)
        above = {os.path.realpath(root / parent) for parent in relative.parents}
        assert os.path.realpath(folder) not in above, folder
        assert len(relative.parts) < 12, folder


@pytest.mark.parametrize("name", CASES)
def test_each_case_reads_as_expected(name: str) -> None:
    expected = json.loads((GOLDEN / name / "expected.json").read_text())
    assert case_data(name) == expected


def test_gpud_sysfs_values_are_the_capture_s_own() -> None:
    data = case_data("h100_ib8_gpud_sysfs")
    devices = data["rdma"]["devices"]
    assert data["rdma"]["hcas"] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_7",
        "mlx5_8",
        "mlx5_9",
        "mlx5_bond_0",
    ]
    for name in data["rdma"]["hcas"][:-1]:
        device = devices[name]
        assert (device["board_id"], device["fw_ver"], device["hca_type"]) == (
            "MT_0000000838",
            "28.41.1000",
            "MT4129",
        )
        port = device["ports"]["1"]
        assert (port["state"], port["phys_state"], port["rate"], port["rate_gbps"]) == (
            "ACTIVE",
            "LinkUp",
            "400 Gb/sec (4X NDR)",
            400.0,
        )
        assert port["link_layer"] == "InfiniBand"
        assert port["gids"]["0"]["type"] == "IB"
        assert port["pkeys"] == ["0xffff"]
        assert port["netdevs"] == [
            next(
                iter(
                    n
                    for n in data["netdevs"]
                    if n.startswith("ibp")
                    and data["netdevs"][n]["pci_bus_id"] == device["pci_bus_id"]
                )
            )
        ]
    bond = devices["mlx5_bond_0"]
    assert (bond["hca_type"], bond["fw_ver"], bond["ports"]["1"]["rate"]) == (
        "MT41692",
        "32.38.3056",
        "200 Gb/sec (2X NDR)",
    )
    assert bond["ports"]["1"]["netdevs"] == ["bond0", "enp42s0f0np0"]
    assert data["rdma"]["active_ports"] == data["rdma"]["port_count"] == 9
    assert data["gpudirect_rdma"] == {
        "possible": True,
        "via": "nvidia_peermem",
        "peermem_loaded": "nvidia_peermem",
        "dma_buf": False,
        "why": "nvidia_peermem is loaded",
    }
    assert data["modules"]["mlx5_core"] == {"loaded": True, "version": "24.04-0.6.6"}
    assert data["settings_problems"] == []


def test_ports_down_are_named_with_their_physical_state() -> None:
    data = case_data("h100_roce12_two_down_ibstat")
    assert data["rdma"]["active_ports"] == 10
    assert data["rdma"]["inactive_ports"] == [
        "mlx5_5/1: DOWN (Disabled)",
        "mlx5_11/1: DOWN (Polling)",
    ]
    assert "mlx5_5/1" not in data["rdma"]["rates"]
    # the healthy twin (the same model, another host) has every port up
    assert case_data("h100_roce12_ibstat")["rdma"]["active_ports"] == 12


def test_the_roce_gid_tables_of_nccl_1538_have_no_index_3() -> None:
    data = case_data("roce4_gid_nccl1538")
    problems = data["gid_index"]["problems"]
    assert [p.split(":")[0] for p in problems] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
    assert problems[0] == (
        "mlx5_0/1: GID index 3 is empty (GID table: 4 RoCE v1 ipv6-link-local, 5 RoCE v2"
        " ipv6-link-local, 6 RoCE v1 10.156.129.132, 7 RoCE v2 10.156.129.132)"
    )
    ports = data["rdma"]["devices"]["mlx5_2"]["ports"]["1"]
    assert ports["gids"]["7"] == {
        "gid": "0000:0000:0000:0000:0000:ffff:0a9c:8984",
        "type": "RoCE v2",
        "netdev": "net3",
    }
    assert ports["netdevs"] == ["net3"]
    # index 6 is the IPv4 RoCE v1 entry; 7, its v2 twin, is right; unset, NCCL picks 7 itself
    six = case_data("roce4_gid_nccl1538", {"NCCL_IB_GID_INDEX": "6"})["gid_index"]["problems"]
    assert six[0].startswith("mlx5_0/1: GID index 6 is RoCE v1, not RoCE v2")
    assert (
        case_data("roce4_gid_nccl1538", {"NCCL_IB_GID_INDEX": "7"})["gid_index"]["problems"] == []
    )
    auto = case_data("roce4_gid_nccl1538", {})["gid_index"]
    assert auto["problems"] == []
    assert auto["ports"]["mlx5_3/1"]["index"] == "7"


def test_the_gid_index_is_not_judged_where_ib_is_off() -> None:
    for env in ({"NCCL_IB_DISABLE": "1"}, {"NCCL_NET": "Socket"}):
        found = case_data("roce4_gid_nccl1538", {**env, "NCCL_IB_GID_INDEX": "3"})["gid_index"]
        assert (found["problems"], found["ports"]) == ([], {})
        assert "not used" in found["note"]


def test_efa_devices_and_the_aws_plugin() -> None:
    data = case_data("p4d_efa4")
    assert data["rdma"]["hcas"] == ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]
    device = data["rdma"]["devices"]["rdmap16s27"]
    assert (device["driver"], device["vendor_id"], device["pci_bus_id"], device["fw_ver"]) == (
        "efa",
        "0x1d0f",
        "0000:10:1b.0",
        "",
    )
    assert device["ports"]["1"]["link_layer"] == "Unknown"
    assert data["rdma"]["roce_ports"] == []
    plugins = data["nccl_plugins"]
    assert plugins["loads"] == {
        "name": "libnccl-net.so",
        "path": "/opt/amazon/ofi-nccl/lib/libnccl-net.so",
        "real_path": "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
        "found_by": "LD_LIBRARY_PATH",
        "kind": "aws-ofi-nccl",
        "version": "1.14.2",
    }
    assert plugins["in_use"] == "aws-ofi-nccl 1.14.2 at /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
    assert len(plugins["found"]) == 1  # the symlink and its file are one plugin
    assert data["settings_problems"] == []  # NCCL_NET="AWS Libfabric" names the loaded plugin
    assert data["nccl_settings"]["NCCL_SOCKET_IFNAME"]["resolves_to"] == [
        "ens32",
        "ens65",
        "ens130",
        "ens163",
    ]
    assert data["gpudirect_rdma"]["via"] == "dma-buf"


def test_a_host_without_rdma_says_so_plainly() -> None:
    data = case_data("local_no_rdma")
    assert data["rdma"]["summary"] == (
        "no RDMA devices: /sys/class/infiniband does not exist; /dev/infiniband does not exist"
    )
    assert (data["rdma"]["hcas"], data["rdma"]["active_ports"], data["rdma"]["devices"]) == (
        [],
        0,
        {},
    )
    assert list(data["netdevs"]) == ["eth0"]
    assert data["netdevs"]["eth0"]["driver"] == "virtio_net"
    assert "lo" in data["virtual_netdevs"]
    assert data["gpudirect_rdma"]["possible"] is False
    assert data["nccl_plugins"]["in_use"] == "none: NCCL's internal IB and Socket transports"


H200_REAL = GOLDEN / "h200_real"


def test_the_lent_h200_says_no_rdma_plainly_and_its_tree_reads_as_it_did() -> None:
    """The probe by hand on the lent H200 VM (bench/device_net.sh): an empty /sys/class/infiniband,
    /dev/infiniband/rdma_cm alone, one virtio NIC. Its golden tree (its /sys/class/net, modules,
    kernel and driver lines) reads as the host did, ldconfig aside (the tree run reads none)."""
    real = json.loads((H200_REAL / "net_by_hand.json").read_text())
    assert real["ok"] is True
    assert real["data"]["rdma"]["summary"] == (
        "no RDMA devices: /sys/class/infiniband is empty; /dev/infiniband holds rdma_cm"
    )
    assert real["data"]["timings_s"]["total"] < 0.3
    tree = case_data("h200_no_rdma")
    real_data = dict(real["data"])
    real_data.pop("timings_s")
    real_data["nccl_plugins"] = dict(real_data["nccl_plugins"], ldconfig_read=False)
    assert tree == real_data


def test_rdma_cm_alone_under_dev_is_said(tmp_path: Path) -> None:
    root = copy_case("local_no_rdma", tmp_path)
    (root / "dev" / "infiniband").mkdir(parents=True)
    (root / "dev" / "infiniband" / "rdma_cm").write_text("")
    data = probe_tree(root)
    assert data["rdma"]["summary"] == (
        "no RDMA devices: /sys/class/infiniband does not exist; /dev/infiniband holds rdma_cm"
    )
    assert data["dev_infiniband"] == ["rdma_cm"]


def test_unreadable_rdma_devices_are_null_not_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_case("h100_roce12_ibstat", tmp_path)
    listdir = os.listdir

    def refuse(path: Any) -> list[str]:
        if str(path).endswith("sys/class/infiniband"):
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)

    monkeypatch.setattr(NET.os, "listdir", refuse)
    data = probe_tree(root, {"NCCL_IB_HCA": "mlx5_0"})
    rdma = data["rdma"]
    assert rdma["devices"] is rdma["hcas"] is rdma["active_ports"] is rdma["rates"] is None
    assert data["unreadable"] == ["/sys/class/infiniband"]
    assert data["settings_problems"] is None  # NCCL_IB_HCA cannot be judged
    assert data["gid_index"]["problems"] is None
    assert data["gpudirect_rdma"]["possible"] is None


def test_an_unreadable_port_state_makes_the_count_unknown(tmp_path: Path) -> None:
    root = copy_case("h100_roce12_ibstat", tmp_path)
    state = root / "sys/class/infiniband/mlx5_3/ports/1/state"
    os.remove(os.path.realpath(state))
    rdma = probe_tree(root)["rdma"]
    assert rdma["active_ports"] is None
    assert "mlx5_3/1: state unreadable (LinkUp)" in rdma["inactive_ports"]


# ---------------------------------------------------------------- settings against devices


def settings_of(name: str, env: dict[str, str]) -> tuple[dict[str, Any], list[str] | None]:
    data = case_data(name, env)
    return data["nccl_settings"], data["settings_problems"]


def test_an_hca_that_names_nothing_is_said() -> None:
    settings, problems = settings_of("h100_ib8_gpud_sysfs", {"NCCL_IB_HCA": "mlx5_0:1,mlx5_12"})
    assert settings["NCCL_IB_HCA"]["resolves_to"] == ["mlx5_0/1"]
    assert settings["NCCL_IB_HCA"]["names_nothing"] == ["mlx5_12"]
    assert problems is not None
    assert problems[0].startswith(
        "NCCL_IB_HCA=mlx5_0:1,mlx5_12 (environment): mlx5_12 names no RDMA port here"
        " (RDMA ports here: mlx5_0/1, mlx5_1/1, mlx5_4/1,"
    )


def test_a_port_that_does_not_exist_names_nothing() -> None:
    settings, problems = settings_of("h100_ib8_gpud_sysfs", {"NCCL_IB_HCA": "=mlx5_0:2"})
    assert settings["NCCL_IB_HCA"]["names_nothing"] == ["mlx5_0:2"]
    assert problems


def test_prefixes_match_more_than_one_device_and_say_so() -> None:
    settings, problems = settings_of("h100_roce12_ibstat", {"NCCL_IB_HCA": "mlx5_1"})
    assert settings["NCCL_IB_HCA"]["resolves_to"] == ["mlx5_1/1", "mlx5_10/1", "mlx5_11/1"]
    assert "mlx5_1 also matches mlx5_10, mlx5_11" in settings["NCCL_IB_HCA"]["note"]
    assert problems == []
    exact, _ = settings_of("h100_roce12_ibstat", {"NCCL_IB_HCA": "=mlx5_1"})
    assert exact["NCCL_IB_HCA"]["resolves_to"] == ["mlx5_1/1"]


def test_exclusions_that_leave_nothing_are_a_problem_and_those_that_miss_a_note() -> None:
    settings, problems = settings_of("p4d_efa4", {"NCCL_IB_HCA": "^rdmap,mlx5"})
    assert settings["NCCL_IB_HCA"]["resolves_to"] == []
    assert problems
    assert "excludes every RDMA port here" in problems[0]
    settings, problems = settings_of("p4d_efa4", {"NCCL_IB_HCA": "^mlx5"})
    assert problems == []
    assert settings["NCCL_IB_HCA"]["note"] == "excludes mlx5, which match no RDMA port here"
    assert len(settings["NCCL_IB_HCA"]["resolves_to"]) == 4


def test_socket_ifname_is_resolved_against_every_interface_virtual_too() -> None:
    settings, problems = settings_of("local_no_rdma", {"NCCL_SOCKET_IFNAME": "eth0,lo"})
    assert settings["NCCL_SOCKET_IFNAME"]["resolves_to"] == ["eth0", "lo"]
    assert problems == []
    _, problems = settings_of("local_no_rdma", {"NCCL_SOCKET_IFNAME": "ib0"})
    assert problems == [
        "NCCL_SOCKET_IFNAME=ib0 (environment): ib0 names no network interface here (network"
        " interfaces here: eth0, fbr25203, fv25203h0, fv25203h1, fv25203h2, fv25203h3, ifb0,"
        " ifb1, lo)"
    ]


def test_nccl_net_ib_needs_an_rdma_device_and_a_plugin_name_needs_a_plugin() -> None:
    _, problems = settings_of("local_no_rdma", {"NCCL_NET": "IB"})
    assert problems == [
        "NCCL_NET=IB (environment): NCCL's IB transport needs an RDMA device, and there is none"
    ]
    _, problems = settings_of("h100_ib8_gpud_sysfs", {"NCCL_NET": "AWS Libfabric"})
    assert problems
    assert "NCCL loads no plugin here (libnccl-net.so)" in problems[0]
    _, problems = settings_of(
        "p4d_efa4", {"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib", "NCCL_NET": "gIB"}
    )
    assert problems
    assert "calls its transport AWS Libfabric or Libfabric or OFI" in problems[0]
    _, problems = settings_of("local_no_rdma", {"NCCL_NET": "Socket"})
    assert problems == []


def test_settings_come_from_the_environment_then_the_conf_files(tmp_path: Path) -> None:
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    (root / "etc").mkdir()
    (root / "etc" / "nccl.conf").write_text("# site\nNCCL_IB_HCA=mlx5_9\nNCCL_IB_GID_INDEX=3\n")
    (root / "home" / "me").mkdir(parents=True)
    (root / "home" / "me" / ".nccl.conf").write_text("NCCL_IB_GID_INDEX=5\n")
    data = probe_tree(root, {"HOME": "/home/me", "NCCL_IB_HCA": "mlx5_0"})
    assert data["nccl_settings"]["NCCL_IB_HCA"]["source"] == "environment"
    assert data["nccl_settings"]["NCCL_IB_GID_INDEX"] == {
        "value": "5",
        "source": "~/.nccl.conf",
    }


# ---------------------------------------------------------------- plugins


def stub_plugin(path: Path, text: str = "NET/OFI Initializing aws-ofi-nccl 1.13.2-aws") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF stand-in " + text.encode())


def test_a_plugin_on_ldconfig_is_the_one_nccl_loads(tmp_path: Path) -> None:
    stub_plugin(tmp_path / "usr/lib/x86_64-linux-gnu/libnccl-net.so")
    ldconfig = (
        "3 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"
        "\tlibnccl-net.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl-net.so\n"
    )
    plugins = probe_tree(tmp_path, {}, ldconfig)["nccl_plugins"]
    assert plugins["loads"]["found_by"] == "ldconfig"
    assert plugins["in_use"] == (
        "aws-ofi-nccl 1.13.2-aws at /usr/lib/x86_64-linux-gnu/libnccl-net.so"
    )


def test_a_plugin_installed_off_the_search_path_is_found_but_not_loaded(tmp_path: Path) -> None:
    stub_plugin(tmp_path / "usr/local/gib/lib64/libnccl-net_internal.so", "NET/gIB : gIB")
    plugins = probe_tree(tmp_path)["nccl_plugins"]
    assert plugins["loads"] is None
    assert plugins["in_use"] == "none: NCCL's internal IB and Socket transports"
    assert [(p["path"], p["kind"], p["found_by"]) for p in plugins["found"]] == [
        ("/usr/local/gib/lib64/libnccl-net_internal.so", "gIB", "installed")
    ]
    # NCCL_NET_PLUGIN naming the file (a path) loads it
    env = {"NCCL_NET_PLUGIN": "/usr/local/gib/lib64/libnccl-net_internal.so"}
    plugins = probe_tree(tmp_path, env)["nccl_plugins"]
    assert (plugins["loads"]["kind"], plugins["loads"]["found_by"]) == ("gIB", "path")


def test_nccl_net_plugin_names_a_suffix_and_none_disables(tmp_path: Path) -> None:
    stub_plugin(tmp_path / "opt/ofi/lib/libnccl-net-ofi.so")
    env = {"LD_LIBRARY_PATH": "/opt/ofi/lib", "NCCL_NET_PLUGIN": "ofi"}
    data = probe_tree(tmp_path, env)
    assert data["nccl_plugins"]["tries"] == ["ofi", "libnccl-net-ofi.so"]
    assert data["nccl_plugins"]["loads"]["name"] == "libnccl-net-ofi.so"
    assert data["settings_problems"] == []
    data = probe_tree(tmp_path, {**env, "NCCL_NET_PLUGIN": "none"})
    assert data["nccl_plugins"]["loads"] is None
    assert data["nccl_plugins"]["in_use"].startswith("none (NCCL_NET_PLUGIN=none)")
    data = probe_tree(tmp_path, {**env, "NCCL_NET_PLUGIN": "sharp"})
    assert data["settings_problems"] == [
        "NCCL_NET_PLUGIN=sharp (environment): no such library on NCCL's search path (tried sharp,"
        " libnccl-net-sharp.so)"
    ]


def test_plugins_in_the_python_environment_s_nvidia_packages(tmp_path: Path) -> None:
    stub_plugin(tmp_path / "venv/site-packages/nvidia/nccl/lib/libnccl-net.so.1.2.3", "plugin")
    plugins = probe_tree(tmp_path, python_paths=("/venv/site-packages",))["nccl_plugins"]
    assert [(p["found_by"], p["version"], p["kind"]) for p in plugins["found"]] == [
        ("python:nvidia/nccl", "1.2.3", None)
    ]


# ---------------------------------------------------------------- its parts


def test_ships_every_helper_it_imports() -> None:
    """On a host a helper is importable only when SHIPS lists it (those helpers import too)."""
    assert set(NET.SHIPS) == helpers_imported("net")


# ---------------------------------------------------------------- pure parsers


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4: ACTIVE", "ACTIVE"), ("5: LinkUp", "LinkUp"), ("2: Polling", "Polling"), ("", None)],
)
def test_parse_port_state(text: str, expected: str | None) -> None:
    assert RDMA.parse_port_state(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("400 Gb/sec (4X NDR)", 400.0),
        ("200 Gb/sec (2X NDR)", 200.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("junk", None),
        (None, None),
    ],
)
def test_parse_rate(text: str | None, expected: float | None) -> None:
    assert RDMA.parse_rate_gbps(text) == expected


def test_gid_helpers() -> None:
    assert RDMA.parse_gid_type("IB/RoCE v1") == "RoCE v1"
    assert RDMA.parse_gid_type("RoCE v2") == "RoCE v2"
    assert RDMA.parse_gid_type(None) is None
    gid = "0000:0000:0000:0000:0000:ffff:ac13:003c"
    assert (RDMA.gid_family(gid), RDMA.ipv4_of(gid)) == ("ipv4", "172.19.0.60")
    assert RDMA.gid_family("fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8") == "ipv6-link-local"


def test_parse_name_list() -> None:
    assert SETTINGS.parse_name_list("^=mlx5_0:1,mlx5_3") == {
        "exclude": True,
        "exact": True,
        "entries": [{"name": "mlx5_0", "port": 1}, {"name": "mlx5_3", "port": None}],
    }


def test_small_parsers() -> None:
    modules = "nvidia_peermem 16384 0 - Live 0x0000000000000000\nmlx5_ib 516096 0 - Loading 0x0\n"
    assert KERNEL.parse_proc_modules(modules) == {"nvidia_peermem": "Live", "mlx5_ib": "Loading"}
    assert KERNEL.parse_kernel_release("6.8.0-1015-nvidia") == (6, 8)
    assert KERNEL.parse_nvidia_flavour(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64"
    ) == ("open")
    assert KERNEL.parse_nvidia_flavour(None) is None
    assert PLUGIN.plugin_names_tried(None) == ["libnccl-net.so"]
    assert PLUGIN.plugin_names_tried("libnccl-net-gib.so,aws") == [
        "libnccl-net-gib.so",
        "aws",
        "libnccl-net-aws.so",
    ]


def test_gpudirect_needs_peermem_or_dma_buf() -> None:
    loaded = {name: {"loaded": name == "nvidia_peermem"} for name in KERNEL.MODULES}
    none = {name: {"loaded": False} for name in KERNEL.MODULES}
    unknown = {name: {"loaded": None} for name in KERNEL.MODULES}
    judge = KERNEL.gpudirect_rdma
    assert judge(loaded, True, (5, 4), "proprietary")["via"] == "nvidia_peermem"
    assert judge(none, True, (5, 15), "open")["via"] == "dma-buf"
    old = judge(none, True, (5, 4), "open")
    assert old["possible"] is False
    assert "Linux 5.4, open module" in old["why"]
    assert judge(none, True, (6, 8), "proprietary")["possible"] is False
    assert judge(unknown, True, (5, 4), "proprietary")["possible"] is None
    assert judge(none, False, (6, 8), "open")["possible"] is False


# ---------------------------------------------------------------- by hand, on this machine


def test_runs_by_hand_here_and_says_what_it_found() -> None:
    result = run_by_hand("net")
    assert result["ok"] is True
    assert result["error"] is None
    data = result["data"]
    if not data["rdma"]["devices"]:
        assert data["rdma"]["summary"].startswith("no RDMA devices: ")
    assert isinstance(data["netdevs"], dict)
    assert data["timings_s"]["total"] < 0.3
