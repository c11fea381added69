"""The health rules of the inference pack on golden run documents: the real H200 run document
(tests/probes/golden/real_run/h200x2_run.json) with its health probe result built from the health
probe's golden captures (tests/probes/golden/health/<case>/), one fault per host."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.facts import declared_facts
from fleet.checks import CheckReport, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from tests.conftest import ROOT
from tests.probes.health_cases import (
    case_data,
    health,
    host_facts,
    kernel_log,
    kernel_logs,
    nvidia_smi,
    pcie,
    real_host,
    text,
)

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x2_run.json"
HEALTH_RULES = (
    "health-nvidia-smi-answers",
    "health-driver-versions-match",
    "health-ecc-uncorrected",
    "health-row-remap",
    "health-retired-pages",
    "health-hw-slowdown",
    "health-bad-xid",
    "health-nvlink",
    "health-nvswitch-fabric",
    "health-pcie-width",
    "health-acs-off-for-pcie-p2p",
    "health-iommu-not-translating-for-pcie-p2p",
    # step two (tests/probes/test_health_sample.py): counters that rise, what should be there
    "health-ib-link-downed",
    "health-ib-symbol-errors",
    "health-nvlink-errors-rising",
    "health-aer-correctable-rising",
    "health-ecc-uncorrected-rising",
    "health-hw-slowdown-time-rising",
    "health-gpus-on-bus-listed",
    "health-fabric-manager-running",
    "health-same-gpu-firmware",
)
Host = dict[str, Any]


def rules() -> list[Any]:
    loaded = load_rules(pack_path("inference"), tuple(available_probes()))
    return [r for r in loaded if r.id.startswith("health-")]


def h200_with_log(case: str) -> dict[str, Any]:
    """The real H200 pair's captures, with the kernel log of `case` (a public capture)."""
    return health.build_data(  # type: ignore[no-any-return]
        text("h200x2", "nvidia-smi_-q_-x.xml"),
        text("h200x2", "nvidia-smi_nvlink_-s.txt"),
        None,
        text("h200x2", "proc_driver_nvidia_version.txt"),
        kernel_log(case),
    )


def pcie_host(health_data: dict[str, Any]) -> Host:
    """A host whose GPUs talk P2P over PCIe (gpu probe: interconnect pcie)."""
    host = real_host(health_data)
    host["probes"]["gpu"]["data"]["interconnect"] = "pcie"
    return host


def judge(**hosts: Host) -> CheckReport:
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = hosts
    return evaluate(rules(), Run.from_dict(document))


def verdicts(report: CheckReport, host: str) -> dict[str, Any]:
    return {r.rule.id: next(v for v in r.verdicts if v.host == host) for r in report.results}


def test_every_health_rule_is_in_the_pack() -> None:
    assert tuple(r.id for r in rules()) == HEALTH_RULES
    assert all(r.fix and r.description for r in rules())


def test_healthy_single_h200_from_the_lent_machine_passes_every_health_rule() -> None:
    report = judge(h200=real_host(case_data("h200x1_device")))
    statuses = {rule: v.status for rule, v in verdicts(report, "h200").items()}
    assert set(statuses.values()) <= {"pass", "n/a"}, statuses
    # judged, not skipped: what this one-GPU VM has
    for rule in (
        "health-nvidia-smi-answers",
        "health-driver-versions-match",
        "health-ecc-uncorrected",
        "health-row-remap",
        "health-hw-slowdown",
        "health-bad-xid",
        "health-pcie-width",
    ):
        assert statuses[rule] == "pass", rule
    # no NVLink in use and no fabric on this VM; GPUs on NVLink (the run's gpu probe): no P2P rules
    assert statuses["health-nvlink"] == "n/a"
    assert statuses["health-nvswitch-fabric"] == "n/a"
    assert not report.failed


def test_healthy_h200_pair_passes_and_says_what_it_could_not_read() -> None:
    report = judge(h200=real_host(case_data("h200x2")))
    statuses = {rule: v.status for rule, v in verdicts(report, "h200").items()}
    assert statuses["health-nvswitch-fabric"] == "pass"
    assert statuses["health-row-remap"] == "pass"
    # no `nvidia-smi nvlink -e` in that capture: error counters not readable, so unknown
    assert statuses["health-nvlink"] == "unknown"
    # no kernel module text there? It has /proc/driver/nvidia/version: versions compared
    assert statuses["health-driver-versions-match"] == "pass"
    assert not report.failed


FAULTS = [
    # (case or builder, rule that must fail, text its fix must contain)
    ("remap_pending_gpud80", "health-row-remap", "GPU1 (00000000:00:07.0): pending true"),
    ("xid63_remap_pending_stas00", "health-row-remap", "GPU0 (00000000:00:06.0): pending true"),
    ("xid63_remap_pending_stas00", "health-bad-xid", "Xid 63 on 0000:10:1c"),
    (
        "hw_slowdown_power_brake_l4rz",
        "health-hw-slowdown",
        "GPU0 (00000000:00:06.0): hw_slowdown hw_power_brake_slowdown (SM 382 of 1980 MHz",
    ),
    (
        "fabric_insufficient_resources_azhpc506",
        "health-nvswitch-fabric",
        "GPU0 (00000000:00:06.0): Completed / Insufficient Resources",
    ),
    (
        "nvlink_inactive_azhpc73",
        "health-nvlink",
        "GPU1 (00000000:00:07.0): 16 of 18 links up, down: [3,5]",
    ),
    (
        "nvlink_errors_layout_stas00",
        "health-nvlink",
        "GPU1 (00000000:00:07.0): 18 of 18 links up, down: [], errors: link 2 crc_errors=3, link 2 replay_errors=12",
    ),
    (
        "m10x4_gen1_x8_itnovum",
        "health-pcie-width",
        "GPU0 (00000000:1A:00.0): x8 of x16, Gen1 of Gen3",
    ),
    (
        "p100_retired_pages_pending",
        "health-retired-pages",
        "GPU0 (0000:04:00.0): 0 double-bit, 2 single-bit retired pages",
    ),
    (
        "xid79_fallen_off_bus_akash209",
        "health-nvidia-smi-answers",
        "Unable to determine the device handle for GPU0000:A1:00.0",
    ),
    (
        "xid79_fallen_off_bus_akash209",
        "health-bad-xid",
        "Xid 79 on 0000:a1:00 at Fri Apr  5 21:29:39 2024: GPU has fallen off the bus",
    ),
]


@pytest.mark.parametrize(("case", "rule", "named"), FAULTS)
def test_fault_capture_fails_its_rule_naming_the_gpu_and_the_fix(
    case: str, rule: str, named: str
) -> None:
    report = judge(faulty=real_host(case_data(case)), good=real_host(case_data("h200x1_device")))
    faulty, good = verdicts(report, "faulty"), verdicts(report, "good")
    assert faulty[rule].status == "fail", faulty[rule]
    assert named in faulty[rule].fix
    assert good[rule].status in ("pass", "n/a")
    assert report.failed or rule == "health-pcie-width"  # a warning does not fail the check


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "xid48_64_kernlog_gpuoperator1146",
            ["Xid 48 on 0000:07:00 at Dec  2 11:38:47", "Xid 64 on 0000:07:00"],
        ),
        (
            "xid43_31_94_akash244",
            ["Xid 94 on 0000:00:08 at Fri Aug  9 13:32:56 2024: contained ECC error"],
        ),
    ],
)
def test_bad_xids_in_public_kernel_logs_fail(case: str, expected: list[str]) -> None:
    report = judge(faulty=real_host(h200_with_log(case)))
    verdict = verdicts(report, "faulty")["health-bad-xid"]
    assert verdict.status == "fail"
    for item in expected:
        assert item in verdict.fix
    assert "Xid 43" not in verdict.fix  # 43 and 31: the application's faults
    assert "Xid 31" not in verdict.fix


def test_xid_of_a_gpu_in_the_list_is_named_by_the_gpu() -> None:
    data = h200_with_log("xid48_64_kernlog_gpuoperator1146")
    data["kernel_log"] = kernel_logs.kernel_log_result(
        "dmesg",
        "[ 219.47] NVRM: Xid (PCI:0000:00:07): 48, pid=1, An uncorrectable double bit error\n",
        {},
        data["gpus"],
    )
    verdict = verdicts(judge(faulty=real_host(data)), "faulty")["health-bad-xid"]
    assert (
        "Xid 48 on GPU1 (00000000:00:07.0) at 219.47 s: double-bit (uncorrectable) ECC error"
        in verdict.fix
    )


def test_uncorrected_ecc_names_the_gpu() -> None:
    data = case_data("h200x1_device")
    data["gpus"][0]["ecc"]["volatile"]["uncorrected"] = 2
    verdict = verdicts(judge(faulty=real_host(data)), "faulty")["health-ecc-uncorrected"]
    assert verdict.status == "fail"
    assert "GPU0 (00000000:00:06.0): 2 uncorrected" in verdict.fix


def test_acs_on_a_pcie_p2p_host_fails_with_the_setpci_fix() -> None:
    report = judge(pcie=pcie_host(case_data("acs_enabled_nccl523_2079")))
    verdict = verdicts(report, "pcie")["health-acs-off-for-pcie-p2p"]
    assert verdict.status == "fail"
    assert (
        "0000:40:01.1 (above GPU0 (00000000:41:00.0)): SrcValid+ TransBlk- ReqRedir+" in verdict.fix
    )
    assert "setpci -s BRIDGE ECAP_ACS+6.w=0000" in verdict.fix
    assert "pci=noacs" in verdict.fix
    # the same ACS on an NVLink host is not judged: its GPUs do not talk P2P over PCIe
    nvlink = verdicts(judge(nv=real_host(case_data("acs_enabled_nccl523_2079"))), "nv")
    assert nvlink["health-acs-off-for-pcie-p2p"].status == "n/a"


def test_acs_not_readable_is_unknown_not_pass() -> None:
    data = case_data("acs_enabled_nccl523_2079")
    data["acs"] = pcie.acs_summary(
        {"0000:40:01.1": ["GPU0 (00000000:41:00.0)"]},
        {"0000:40:01.1": {"readable": False, "acs_ctl": None}},
    )
    assert (
        verdicts(judge(pcie=pcie_host(data)), "pcie")["health-acs-off-for-pcie-p2p"].status
        == "unknown"
    )


def test_iommu_translation_on_a_pcie_p2p_host_warns() -> None:
    facts = {
        "cmdline": "intel_iommu=on",
        "iommu_groups": 60,
        "gpu_group_types": {"06:00": "DMA-FQ"},
    }
    data = health.build_data(
        text("h200x1_device", "nvidia-smi_-q_-x.xml"), "", "", None, (None, None, {}), facts
    )
    verdict = verdicts(judge(pcie=pcie_host(data)), "pcie")[
        "health-iommu-not-translating-for-pcie-p2p"
    ]
    assert verdict.status == "fail"
    assert "translation mode" in verdict.fix
    assert "iommu=pt" in verdict.fix
    passthrough = dict(data, iommu=dict(data["iommu"], mode="passthrough"))
    ok = verdicts(judge(pcie=pcie_host(passthrough)), "pcie")[
        "health-iommu-not-translating-for-pcie-p2p"
    ]
    assert ok.status == "pass"
    unknown = dict(data, iommu=dict(data["iommu"], mode=None))
    no = verdicts(judge(pcie=pcie_host(unknown)), "pcie")[
        "health-iommu-not-translating-for-pcie-p2p"
    ]
    assert no.status == "unknown"


def test_driver_version_mismatch_fails() -> None:
    data = case_data("h200x1_device")
    data["driver"] = health.driver_versions(
        None,
        health.parse_module_version(text("h200x1_device", "proc_driver_nvidia_version.txt")),
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95",
    )
    verdict = verdicts(judge(faulty=real_host(data)), "faulty")["health-driver-versions-match"]
    assert verdict.status == "fail"
    assert "nvidia-smi/NVML is 580.95, the loaded kernel module 580.159.04" in verdict.fix


def test_unreadable_fields_make_rules_unknown_never_pass() -> None:
    data = case_data("h200x1_device")
    gpu = data["gpus"][0]
    gpu["ecc"]["volatile"]["uncorrected"] = None
    gpu["remapped_rows"]["pending"] = None
    gpu["clock_events"] = nvidia_smi.clock_summary(None, None)
    gpu["pcie"]["width_max"] = None
    data["kernel_log"] = kernel_logs.kernel_log_result(
        None, None, {"dmesg": "Operation not permitted"}, []
    )
    data["driver"]["versions_match"] = None
    statuses = {r: v.status for r, v in verdicts(judge(h=real_host(data)), "h").items()}
    for rule in (
        "health-ecc-uncorrected",
        "health-row-remap",
        "health-hw-slowdown",
        "health-pcie-width",
        "health-bad-xid",
        "health-driver-versions-match",
    ):
        assert statuses[rule] == "unknown", rule


def test_no_gpu_list_makes_gpu_rules_unknown_or_not_applicable() -> None:
    data = case_data("xid79_fallen_off_bus_akash209")  # nvidia-smi failed: no GPUs
    statuses = {r: v.status for r, v in verdicts(judge(h=real_host(data)), "h").items()}
    assert statuses["health-nvidia-smi-answers"] == "fail"
    assert statuses["health-hw-slowdown"] == "unknown"
    assert statuses["health-pcie-width"] == "unknown"
    assert "pass" not in statuses.values()  # nothing about the GPUs passes without a GPU list


def test_absent_health_probe_skips_every_health_rule() -> None:
    host = real_host(case_data("h200x1_device"))
    host["probes"]["health"].update(status="absent", ok=False, error="nvidia-smi not found")
    statuses = {v.status for v in verdicts(judge(h=host), "h").values()}
    assert statuses == {"skipped"}


def test_host_facts_of_the_acs_case() -> None:
    facts = host_facts("acs_enabled_nccl523_2079")
    assert facts["gpu_bridges"] == {"41:00": ["0000:40:01.1"], "61:00": ["0000:60:01.1"]}


# ------------------------------------------------------------------ the diff (FACTS of probes/health.py)


def twins(change: Any = None) -> Run:
    """Two H200 pairs reporting the same health, with readings that move run to run changed on
    the twin (temperatures, power draw, clocks, active idle reason, identities, timings)."""
    local = real_host(case_data("h200x2"))
    twin = copy.deepcopy(local)
    twin["probes"]["system"]["data"]["hostname"] = "twin"
    for index, gpu in enumerate(twin["probes"]["gpu"]["data"]["gpus"]):
        gpu["uuid"] = f"GPU-twin-{index}"
    data = twin["probes"]["health"]["data"]
    for index, gpu in enumerate(data["gpus"]):
        gpu.update(uuid=f"GPU-twin-{index}", serial=f"twin-{index}", performance_state="P2")
        gpu["temperature"].update(gpu_c=61, memory_c=66, tlimit_c=20, slowdown_margin_c=22)
        gpu["power"]["draw_w"] = 512.5
        gpu["clocks"]["sm_mhz"] = 1980
        gpu["pcie"]["gen"] = 1  # drops at idle
        gpu["clock_events"].update(active=[], mask="0x0000000000000000")
    data["timings_s"] = {"total": 0.4}
    if change:
        change(data)
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = {"local": local, "twin": twin}
    return Run.from_dict(document)


def test_twins_whose_readings_differ_show_no_health_divergence() -> None:
    diff = compare_hosts(twins().hosts.values(), declared_facts())
    assert [d.fact for d in diff.values if d.fact.startswith("health.")] == []


def test_a_pending_remap_on_the_twin_is_a_divergence() -> None:
    def pending(data: dict[str, Any]) -> None:
        data["gpus"][1]["remapped_rows"].update(pending=True, uncorrectable=4)

    diff = compare_hosts(twins(pending).hosts.values(), declared_facts())
    facts = {d.fact for d in diff.values}
    assert "health.gpus[1].remapped_rows.pending" in facts
    assert "health.gpus[1].remapped_rows.uncorrectable" in facts


REAL_H200X1 = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x1_health_run.json"


def test_the_real_single_h200_run_judges_every_health_rule_and_passes() -> None:
    """The probe's first real run (bench/device_health.sh): every health rule reaches a verdict
    (pass, or n/a where the host has no NVLink/NVSwitch/PCIe P2P), none unknown, none failed."""
    run = Run.from_dict(json.loads(REAL_H200X1.read_text()))
    report = evaluate(rules(), run)
    verdicts = {r.rule.id: {v.status for v in r.verdicts} for r in report.results}
    health_verdicts = {rule: verdicts[rule] for rule in HEALTH_RULES}
    assert all(statuses <= {"pass", "n/a"} for statuses in health_verdicts.values()), (
        health_verdicts
    )
    assert health_verdicts["health-ecc-uncorrected"] == {"pass"}
    assert health_verdicts["health-hw-slowdown"] == {"pass"}
    assert health_verdicts["health-bad-xid"] == {"pass"}  # dmesg was readable there (root)


def test_the_real_single_h200_run_reports_every_health_field() -> None:
    data = json.loads(REAL_H200X1.read_text())["hosts"]["local"]["probes"]["health"]["data"]
    (gpu,) = data["gpus"]
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert gpu["uuid"].startswith("GPU-")
    assert gpu["ecc"]["mode"] == "Enabled"
    assert gpu["ecc"]["volatile"]["uncorrected"] == 0
    assert gpu["remapped_rows"] == {
        "correctable": 0, "uncorrectable": 0, "pending": False, "failure": False,
    }  # fmt: skip
    assert gpu["clock_events"]["active"] == ["gpu_idle"]
    assert (gpu["pcie"]["gen"], gpu["pcie"]["width"]) == (gpu["pcie"]["gen_max"], 16)
    assert data["kernel_module"]["flavour"] == "open"
    assert data["driver"]["versions_match"] is True
    assert data["kernel_log"]["readable"] is True
    assert data["kernel_log"]["xids"] == []
