"""Health, step two: counters read twice (`--sample`), the GPUs on the PCI bus against
nvidia-smi's list, the fabric manager, and the rules that judge them. Every fixture is under
tests/probes/golden/health/samples/<case>/ with its SOURCE.md; the two reads are built from it (a
sysfs tree written into a temporary folder, nvidia-smi outputs as text), the sampling interval
injected: nothing waits."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fleet.checks import CheckReport, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from tests.probes.handrun import load_helper
from tests.probes.health_cases import GOLDEN, case_data, health, real_host, text
from tests.probes.net_cases import copy_case, replace_file
from tests.probes.net_cases import probe_tree as net_probe_tree
from tests.recorded import REAL_RUN

SAMPLES = GOLDEN / "samples"
sampling = load_helper("_health_sample")
fabric = load_helper("_fabric_manager")
nvlink = load_helper("_nvlink")
smi_xml = load_helper("_nvidia_smi_xml")
Host = dict[str, Any]
Reads = dict[str, Any]


# ---------------------------------------------------------------- building the reads


def write_ib_tree(root: Path, counters: dict[str, dict[str, str]]) -> Path:
    """/sys/class/infiniband/DEV/ports/N/counters/NAME under `root`, as the kernel writes them."""
    for port, values in counters.items():
        device, number = port.split("/")
        folder = root / "sys/class/infiniband" / device / "ports" / number / "counters"
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in values.items():
            (folder / name).write_text(value + "\n")
    return root


def write_pci_tree(
    root: Path, listing: str, files: dict[str, dict[str, str]] | None = None
) -> Path:
    """/sys/bus/pci/devices/BDF/{vendor,class} from a `sysfs_pci_devices.txt` listing, and any
    other files of a device (`files`: {bdf: {name: text}})."""
    for line in listing.splitlines():
        bus_id, vendor, klass = line.split()[:3]
        folder = root / "sys/bus/pci/devices" / bus_id.rsplit("/", 1)[1]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "vendor").write_text(vendor + "\n")
        (folder / "class").write_text(klass + "\n")
        for name, content in (files or {}).get(folder.name, {}).items():
            (folder / name).write_text(content)
    return root


def sample_of(first: Reads, second: Reads, seconds: float) -> dict[str, Any]:
    """health.sample over two reads, `seconds` apart on a clock of the test's own: no waiting."""
    waited: list[float] = []

    def read_again() -> tuple[Reads, float]:
        return second, 1000.0 + seconds

    result: dict[str, Any] = health.sample(
        first, read_again, seconds, 1000.0, sleep=waited.append, clock=lambda: 1000.0
    )
    assert waited == [seconds]  # it would have slept the interval, once
    return result


def no_reads() -> Reads:
    return {source: {} for source in sampling.SOURCES}


def ib_reads(tmp_path: Path, second_read: str) -> tuple[Reads, Reads, float]:
    case = SAMPLES / "ib_counters_gpud_h100"
    counters = json.loads((case / "counters.json").read_text())
    plan = json.loads((case / "reads.json").read_text())
    later = copy.deepcopy(counters)
    for port, changes in plan["second_reads"][second_read].items():
        later[port].update(changes)
    first, second = no_reads(), no_reads()
    first["sysfs infiniband"] = sampling.read_ib(str(write_ib_tree(tmp_path / "1", counters)))
    second["sysfs infiniband"] = sampling.read_ib(str(write_ib_tree(tmp_path / "2", later)))
    return first, second, float(plan["seconds"])


def h200x2_gpus() -> list[dict[str, Any]]:
    return smi_xml.parse_smi_xml(text("h200x2", "nvidia-smi_-q_-x.xml"))["gpus"]  # type: ignore[no-any-return]


def smi_reads(xml_text: str, nvlink_text: str | None = None) -> Reads:
    gpus = smi_xml.parse_smi_xml(xml_text)["gpus"]
    reads = no_reads()
    reads["nvidia-smi -q -x"] = sampling.smi_counters(gpus)
    if nvlink_text is not None:
        parsed = nvlink.parse_nvlink_errors(nvlink_text)
        reads["nvidia-smi nvlink -e"] = sampling.nvlink_counters(gpus, parsed)
    return reads


# ---------------------------------------------------------------- judging


def rules() -> list[Any]:
    return load_rules(pack_path("inference"), tuple(available_probes()))  # type: ignore[no-any-return]


def with_health(data: dict[str, Any], **changes: Any) -> Host:
    return real_host(dict(data, **changes))


def judge(**hosts: Host) -> CheckReport:
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = hosts
    return evaluate(rules(), Run.from_dict(document))


def verdict(report: CheckReport, rule: str, host: str) -> Any:
    result = next(r for r in report.results if r.rule.id == rule)
    return next(v for v in result.verdicts if v.host == host)


def twins(rule: str, faulty: dict[str, Any], healthy: dict[str, Any]) -> tuple[Any, Any]:
    """The rule's verdicts on a faulty host and its healthy twin, judged together."""
    report = judge(faulty=real_host(faulty), healthy=real_host(healthy))
    return verdict(report, rule, "faulty"), verdict(report, rule, "healthy")


def sampled(sample: dict[str, Any], case: str = "h200x2") -> dict[str, Any]:
    return dict(case_data(case), sample=sample)


# ---------------------------------------------------------------- InfiniBand counters


def test_link_downed_that_rose_fails_and_one_that_stays_passes(tmp_path: Path) -> None:
    rose = sample_of(*ib_reads(tmp_path / "rose", "link_downed_rose"))
    still = sample_of(*ib_reads(tmp_path / "still", "link_downed_still"))
    (row,) = [r for r in rose["counters"] if r["counter"] == "link_downed"]
    assert row == {
        "kind": "ib", "device": "mlx5_1", "port": "1", "counter": "link_downed", "unit": "count",
        "first": 255, "last": 256, "delta": 1, "per_hour": 1.0, "reset": False,
    }  # fmt: skip
    assert rose["read"]["ib"] == 9 * 9  # 9 ports, the 9 error counters gpud's capture has
    bad, good = twins("health-ib-link-downed", sampled(rose), sampled(still))
    assert bad.status == "fail"
    assert bad.fix.startswith("mlx5_1 port 1: link_downed 255 -> 256 in 3600")
    assert good.status == "pass"  # 255, non-zero, but still: reported, not failed
    assert any(r["counter"] == "link_downed" and r["delta"] == 0 for r in still["counters"])


def test_symbol_errors_at_200_per_hour_fail_and_at_50_pass(tmp_path: Path) -> None:
    fast = sample_of(*ib_reads(tmp_path / "fast", "symbol_errors_200_per_hour"))
    slow = sample_of(*ib_reads(tmp_path / "slow", "symbol_errors_50_per_hour"))
    bad, good = twins("health-ib-symbol-errors", sampled(fast), sampled(slow))
    assert bad.status == "fail"
    assert "mlx5_4 port 1: symbol_error +200 (200.0 per hour)" in bad.fix
    assert good.status == "pass"
    report = judge(h=real_host(sampled(slow)))
    assert verdict(report, "health-ib-link-downed", "h").status == "pass"


def test_a_host_without_rdma_ports_is_not_judged_and_unreadable_ports_are_unknown() -> None:
    none = sample_of(no_reads(), no_reads(), 5.0)
    report = judge(h=real_host(sampled(none)))
    assert verdict(report, "health-ib-link-downed", "h").status == "n/a"
    unreadable = no_reads()
    unreadable["sysfs infiniband"] = None
    blind = sample_of(no_reads(), unreadable, 5.0)
    assert blind["read"]["ib"] is None
    assert blind["unreadable"] == ["sysfs infiniband"]
    report = judge(h=real_host(sampled(blind)))
    assert verdict(report, "health-ib-symbol-errors", "h").status == "unknown"


def test_without_a_sample_the_counter_rules_are_not_applicable() -> None:
    report = judge(h=real_host(case_data("h200x2")))
    for rule in (
        "health-ib-link-downed",
        "health-nvlink-errors-rising",
        "health-ecc-uncorrected-rising",
    ):
        assert verdict(report, rule, "h").status == "n/a", rule


def test_a_counter_that_went_down_was_reset_and_is_not_a_rise(tmp_path: Path) -> None:
    first, second, _ = ib_reads(tmp_path, "link_downed_still")
    second["sysfs infiniband"][("ib", "mlx5_1", "1", "link_downed")] = 3
    (row,) = [
        r
        for r in sample_of(first, second, 5.0)["counters"]
        if r["device"] == "mlx5_1" and r["counter"] == "link_downed"
    ]
    assert (row["reset"], row["delta"], row["per_hour"]) == (True, None, None)


# ---------------------------------------------------------------- NVLink, AER, ECC, clock events


def test_nvlink_counters_rising_fail_and_flat_non_zero_pass() -> None:
    case = SAMPLES / "nvlink_rising_stas00"
    xml = text("nvlink_errors_layout_stas00", "nvidia-smi_-q_-x.xml")
    assert xml is not None
    first = smi_reads(xml, (case / "nvidia-smi_nvlink_-e.first.txt").read_text())
    rising = sample_of(
        first, smi_reads(xml, (case / "nvidia-smi_nvlink_-e.rising.txt").read_text()), 5.0
    )
    flat = sample_of(
        first, smi_reads(xml, (case / "nvidia-smi_nvlink_-e.flat.txt").read_text()), 5.0
    )
    assert rising["read"]["nvlink"] == 2 * 18 * 3
    bad, good = twins(
        "health-nvlink-errors-rising",
        sampled(rising, "nvlink_errors_layout_stas00"),
        sampled(flat, "nvlink_errors_layout_stas00"),
    )
    assert bad.status == "fail"
    assert (
        "GPU1 (00000000:00:07.0) link 2: crc_errors +1, GPU1 (00000000:00:07.0) link 2: replay_errors +3"
        in bad.fix
    )
    assert good.status == "pass"
    # with the sample, the counts from the past no longer fail health-nvlink (links all up)
    report = judge(h=real_host(sampled(flat, "nvlink_errors_layout_stas00")))
    assert verdict(report, "health-nvlink", "h").status == "pass"
    unsampled = judge(h=real_host(case_data("nvlink_errors_layout_stas00")))
    assert verdict(unsampled, "health-nvlink", "h").status == "fail"


def test_aer_correctable_rising_warns_naming_the_device(tmp_path: Path) -> None:
    case = SAMPLES / "aer_h200x1"
    listing = "\n".join(
        line for line in (text("h200x1_device", "sysfs_pci_devices.txt") or "").splitlines()
        if line.startswith("/sys/bus/pci/devices/")
    )  # fmt: skip
    zero = {n: (case / f"aer_dev_{n}.txt").read_text() for n in ("fatal", "nonfatal")}

    def read(name: str, correctable: str) -> Reads:
        files = {f"aer_dev_{k}": v for k, v in zero.items()}
        files["aer_dev_correctable"] = (case / correctable).read_text()
        root = write_pci_tree(tmp_path / name, listing, {"0000:00:06.0": files})
        scan = sampling.scan_pci(str(root))
        assert scan == {"gpus": ["0000:00:06.0"], "nvswitches": [], "aer_devices": ["0000:00:06.0"]}
        reads = no_reads()
        reads.update(sampling.read_sysfs(str(root), scan["aer_devices"]))
        return reads

    first = read("first", "aer_dev_correctable.first.txt")
    rising = sample_of(first, read("rising", "aer_dev_correctable.rising.txt"), 5.0)
    still = sample_of(first, read("still", "aer_dev_correctable.first.txt"), 5.0)
    bad, good = twins(
        "health-aer-correctable-rising",
        sampled(rising, "h200x1_device"),
        sampled(still, "h200x1_device"),
    )
    assert bad.status == "fail"
    assert bad.fix.startswith("0000:00:06.0: correctable +7 (5040.0 per hour)")
    assert good.status == "pass"
    assert judge(faulty=real_host(sampled(rising, "h200x1_device"))).failed is False  # a warning


def test_ecc_uncorrected_and_hw_slowdown_time_rising_fail_sw_power_cap_does_not() -> None:
    xml = text("h200x1_device", "nvidia-smi_-q_-x.xml")
    assert xml is not None
    ecc = xml.replace(
        "<dram_uncorrectable>0</dram_uncorrectable>",
        "<dram_uncorrectable>2</dram_uncorrectable>",
        1,
    )
    brake = xml.replace(
        "<clocks_event_reasons_counters_hw_power_brake>0 us<",
        "<clocks_event_reasons_counters_hw_power_brake>1500 us<",
    )
    capped = xml.replace(
        "<clocks_event_reasons_counters_sw_power_cap>0 us<",
        "<clocks_event_reasons_counters_sw_power_cap>4800000 us<",
    )
    first = smi_reads(xml, "")
    bad, good = twins(
        "health-ecc-uncorrected-rising",
        sampled(sample_of(first, smi_reads(ecc, ""), 5.0), "h200x1_device"),
        sampled(sample_of(first, smi_reads(xml, ""), 5.0), "h200x1_device"),
    )
    assert (bad.status, good.status) == ("fail", "pass")
    assert bad.fix.startswith("GPU0 (00000000:00:06.0): uncorrected ECC 0 -> 2 in 5")
    under_load = sample_of(first, smi_reads(capped, ""), 5.0)
    bad, good = twins(
        "health-hw-slowdown-time-rising",
        sampled(sample_of(first, smi_reads(brake, ""), 5.0), "h200x1_device"),
        sampled(under_load, "h200x1_device"),
    )
    assert (bad.status, good.status) == ("fail", "pass")
    assert "GPU0 (00000000:00:06.0): hw_power_brake +1500 us" in bad.fix
    assert [r["counter"] for r in under_load["counters"]] == ["sw_power_cap"]


# ---------------------------------------------------------------- what should be there


def test_a_gpu_on_the_bus_that_nvidia_smi_does_not_list_fails_naming_its_bus_id(
    tmp_path: Path,
) -> None:
    listing = (SAMPLES / "gpu_off_bus_h200x2" / "sysfs_pci_devices.txt").read_text()
    scan = sampling.scan_pci(str(write_pci_tree(tmp_path, listing)))
    assert scan["gpus"] == ["0000:00:06.0", "0000:00:07.0"]
    vfio = tmp_path / "sys/bus/pci/drivers/vfio-pci"
    vfio.mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices/0000:00:07.0/driver").symlink_to(vfio)
    assert sampling.scan_pci(str(tmp_path))["gpus"] == ["0000:00:06.0"]  # given to a VM
    (tmp_path / "sys/bus/pci/devices/0000:00:07.0/driver").unlink()
    xml = text("h200x2", "nvidia-smi_-q_-x.xml") or ""
    one_gpu = xml[: xml.index('<gpu id="00000000:00:07.0"')] + "</nvidia_smi_log>\n"
    args = (text("h200x2", "nvidia-smi_nvlink_-s.txt"), None, None, (None, None, {}))
    faulty = health.build_data(one_gpu, *args, {"pci_scan": scan})
    healthy = health.build_data(xml, *args, {"pci_scan": scan})
    assert faulty["pci_bus"] == {
        "gpus": scan["gpus"],
        "gpu_count": 2,
        "missing_from_nvidia_smi": ["0000:00:07.0"],
    }
    bad, good = twins("health-gpus-on-bus-listed", faulty, healthy)
    assert bad.status == "fail"
    assert bad.fix.startswith(
        "0000:00:07.0 on the PCI bus, not listed by nvidia-smi (1 of 2 listed)"
    )
    assert good.status == "pass"
    assert next(r for r in rules() if r.id == "health-gpus-on-bus-listed").action == "reboot"


def test_no_nvlink_means_a_pcie_gpu_and_no_link_rule() -> None:
    data = case_data("h200x1_device")  # `nvlink -s` printed nothing there
    assert data["interconnect"] == "pcie"
    assert verdict(judge(h=real_host(data)), "health-nvlink", "h").status == "n/a"
    assert case_data("h200x2")["interconnect"] == "nvlink"


def test_the_fabric_manager_down_on_an_nvswitch_host_fails_and_up_passes(tmp_path: Path) -> None:
    case = SAMPLES / "fabric_manager_nvswitch"
    scan = sampling.scan_pci(
        str(write_pci_tree(tmp_path, (case / "sysfs_pci_devices.txt").read_text()))
    )
    assert scan["nvswitches"] == ["0000:00:08.0", "0000:00:09.0", "0000:00:0a.0", "0000:00:0b.0"]

    def host(state: str) -> dict[str, Any]:
        show = fabric.parse_show((case / f"systemctl_show.{state}.txt").read_text())
        ports = fabric.listening_ports([(case / f"proc_net_tcp.{state}.txt").read_text(), None])
        manager = fabric.fabric_manager(scan["nvswitches"], show, ports)
        return dict(case_data("h200x2"), fabric_manager=manager)

    down, up = host("down"), host("up")
    assert down["fabric_manager"]["running"] is False
    assert up["fabric_manager"]["port_6666_listening"] is True
    bad, good = twins("health-fabric-manager-running", down, up)
    assert bad.status == "fail"
    assert (
        "not running on this host with 4 NVSwitch(es) (service failed, port 6666 not listening"
        in bad.fix
    )
    assert good.status == "pass"
    # hosts without NVSwitches are not judged
    assert (
        verdict(
            judge(h=real_host(case_data("h200x2"))), "health-fabric-manager-running", "h"
        ).status
        == "n/a"
    )


@pytest.mark.parametrize(
    ("show", "ports", "running"),
    [
        ("LoadState=loaded\nActiveState=active\n", set(), True),  # the service says so
        (None, {6666}, True),  # no systemd (a container runs it): the port says so
        ("LoadState=not-found\nActiveState=inactive\n", set(), False),
        (None, set(), None),  # neither can tell: another network namespace may hide the port
    ],
)
def test_fabric_manager_running_from_what_can_be_read(
    show: str | None, ports: set[int], running: bool | None
) -> None:
    parsed = fabric.parse_show(show) if show else None
    assert fabric.fabric_manager(["0000:00:08.0"], parsed, ports)["running"] is running


def test_one_active_port_fewer_than_the_cohort_fails_naming_host_device_and_port(
    tmp_path: Path,
) -> None:
    change = json.loads((SAMPLES / "ib_one_port_down_gpud" / "port_down.json").read_text())
    root = copy_case("h100_ib8_gpud_sysfs", tmp_path)
    for port, files in change.items():
        device, number = port.split("/")
        for name, value in files.items():
            replace_file(root / "sys/class/infiniband" / device / "ports" / number / name, value)
    healthy = json.loads(
        json.dumps(net_probe_tree(copy_case("h100_ib8_gpud_sysfs", tmp_path / "h")))
    )
    odd = net_probe_tree(root)
    hosts = {}
    for name, net in (("a", healthy), ("b", healthy), ("c", odd)):
        host = real_host(case_data("h200x2"))
        host["probes"]["net"] = dict(host["probes"]["health"], data=net)
        hosts[name] = host
    report = judge(**hosts)
    bad = verdict(report, "net-same-active-ports", "c")
    assert (bad.status, bad.observed, bad.expected) == ("fail", 8, 9)
    assert bad.fix.startswith("c: 8 active RDMA port(s), 9 on the other")
    assert "not active here: mlx5_6/1: DOWN (Disabled)" in bad.fix
    assert verdict(report, "net-same-active-ports", "a").status == "pass"


def test_vbios_or_gsp_firmware_unlike_its_cohort_warns() -> None:
    data = case_data("h200x2")
    other = copy.deepcopy(data)
    other["gpus"][1]["vbios"] = "96.00.A5.00.1B"
    report = judge(a=real_host(data), b=real_host(data), c=real_host(other))
    bad = verdict(report, "health-same-gpu-firmware", "c")
    assert bad.status == "fail"
    assert bad.observed == "VBIOS 96.00.A5.00.1A, 96.00.A5.00.1B GSP 580.159.04"
    assert bad.expected == "VBIOS 96.00.A5.00.1A GSP 580.159.04"
    assert verdict(report, "health-same-gpu-firmware", "a").status == "pass"


def test_each_new_fact_is_declared() -> None:
    facts = health.FACTS
    assert {"sample", "sample.*"} <= set(facts["volatile"])
    assert {"pci_bus.gpus", "fabric_manager.nvswitch_bus_ids"} <= set(facts["identity"])
    assert "_health_sample.py" in health.SHIPS
    assert "_fabric_manager.py" in health.SHIPS


def test_h200x2_gpus_are_labelled_alike_in_both_reads() -> None:
    labels = {key[1] for key in sampling.smi_counters(h200x2_gpus())}
    assert labels == {"GPU0 (00000000:00:06.0)", "GPU1 (00000000:00:07.0)"}


# ---------------------------------------------------------------- the terminal section


def run_of(**datas: dict[str, Any]) -> Run:
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = {name: real_host(data) for name, data in datas.items()}
    return Run.from_dict(document)


def rendered(run: Run) -> str:
    from io import StringIO

    from rich.console import Console

    from fleet.units.health.terminal import health_view

    table = health_view(run)
    if table is None:
        return ""
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_the_terminal_says_what_rose_and_folds_hosts_alike(tmp_path: Path) -> None:
    rose = sample_of(*ib_reads(tmp_path, "link_downed_rose"))
    xml = text("h200x1_device", "nvidia-smi_-q_-x.xml") or ""
    capped = xml.replace(
        "<clocks_event_reasons_counters_sw_power_cap>0 us<",
        "<clocks_event_reasons_counters_sw_power_cap>4800000 us<",
    )
    load = sample_of(smi_reads(xml, ""), smi_reads(capped, ""), 5.0)
    out = rendered(run_of(a=sampled(rose), b=sampled(rose), c=sampled(load, "h200x1_device")))
    assert "a-b" in out or "a,b" in out or "[a-b]" in out or "a, b" in out
    assert "mlx5_1 1: ib link_downed +1 (1/h)" in out
    assert "GPU0 (00000000:00:06.0): sw_power_cap 96% of 5 s" in out
    assert "clocks held" not in out  # SW power cap is not a hardware hold


def test_no_health_table_without_something_a_sample_saw(tmp_path: Path) -> None:
    assert rendered(run_of(a=case_data("h200x2"), b=case_data("h200x1_device"))) == ""
    # a GPU fault is a finding (health-row-remap), which the report leads with: not said twice
    assert rendered(run_of(a=case_data("remap_pending_gpud80"))) == ""
    still = sample_of(*ib_reads(tmp_path, "link_downed_still"))  # non-zero, nothing rose
    assert rendered(run_of(a=sampled(still))) == ""
