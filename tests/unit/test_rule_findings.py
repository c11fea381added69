"""Failed rules become findings with an action (fleet/findings/from_checks.py), judged by the real
check engine with the built-in inference pack over the real H200 captures: the real 2× H200 run
(tests/probes/golden/real_run/h200x2_run.json) with its health probe's result built from the
health probe's golden captures (tests/probes/golden/health/<case>/), and the real single-H200
gpubench run that hit the SW power cap under load (h200x1_gpubench_run.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet.checks import CheckReport, RuleFileError, evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.findings.from_checks import not_judged_lines, rule_findings
from fleet.findings.model import ACTIONS, Finding
from fleet.findings.xid_catalog import XIDS, actions_in_text, most_disruptive, xid_action
from fleet.models import Run
from tests.conftest import ROOT
from tests.probes.health_cases import case_data, health, text
from tests.probes.health_cases import real_host as host_with_health
from tests.scenarios.sick_fleet import ecc_host_health

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x2_run.json"
GPUBENCH_RUN = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x1_gpubench_run.json"
GOLDEN_HEALTH = ROOT / "tests" / "probes" / "golden" / "health"
GPU1 = "GPU1 (00000000:00:07.0)"
Host = dict[str, Any]


def pack() -> list[Any]:
    return load_rules(pack_path("inference"), tuple(available_probes()))


def judge(**hosts: Host) -> CheckReport:
    document = json.loads(REAL_RUN.read_text())
    document["hosts"] = hosts
    return evaluate(pack(), Run.from_dict(document))


def healthy() -> Host:
    return host_with_health(case_data("h200x1_device"))


def of_kind(findings: list[Finding], kind: str) -> Finding:
    (found,) = [f for f in findings if f.kind == kind]
    return found


def test_the_ecc_host_is_told_to_reset_the_gpu_naming_its_index_and_bus_id() -> None:
    report = judge(ecc=host_with_health(ecc_host_health()), twin=healthy())
    findings = rule_findings(report)
    assert {f.kind for f in findings} == {
        "health-ecc-uncorrected",
        "health-row-remap",
        "health-bad-xid",
    }
    assert all(f.hosts == ("ecc",) and f.severity == "error" for f in findings)
    remap = of_kind(findings, "health-row-remap")
    assert remap.action == "reset-gpu"
    assert remap.where == GPU1
    assert GPU1 in remap.what
    assert "pending true" in remap.what
    assert remap.evidence["observed"] == [
        f"{GPU1}: pending true, failure false, uncorrectable rows 4"
    ]
    assert "nvidia-smi -r -i INDEX" in remap.fix
    ecc = of_kind(findings, "health-ecc-uncorrected")
    assert (ecc.action, ecc.where) == ("reset-gpu", GPU1)
    # Xid 94 (contained: restart the app) and 63 (remap recorded: reset): the most disruptive
    xid = of_kind(findings, "health-bad-xid")
    assert (xid.action, xid.where) == ("reset-gpu", GPU1)
    assert "Xid 94 on GPU1 (00000000:00:07.0)" in xid.what
    # most severe and most disruptive first; one line a human reads
    assert findings[0].action == "reset-gpu"
    assert all("\n" not in f.what for f in findings)


def test_xid_94_alone_calls_for_restarting_the_application() -> None:
    """The public log of akash-network/provider#244: Xid 43 and 31 (the application's, not in
    the rule), and Xid 94, a contained ECC error: NVIDIA's catalog says RESTART_APP."""
    data = health.build_data(
        text("h200x2", "nvidia-smi_-q_-x.xml"),
        text("h200x2", "nvidia-smi_nvlink_-s.txt"),
        None,
        text("h200x2", "proc_driver_nvidia_version.txt"),
        ("dmesg", text("xid43_31_94_akash244", "dmesg.txt"), {}),
    )
    xid = of_kind(rule_findings(judge(h=host_with_health(data))), "health-bad-xid")
    assert xid.action == "restart-app" == XIDS[94].action
    assert XIDS[94].nvidia_action == "RESTART_APP"
    assert xid.where == "PCI 0000:00:08"  # no GPU of this XML sits on that bus


def test_xid_63_with_its_pending_remap_calls_for_a_gpu_reset() -> None:
    findings = rule_findings(judge(h=host_with_health(case_data("xid63_remap_pending_stas00"))))
    xid = of_kind(findings, "health-bad-xid")
    assert xid.action == "reset-gpu" == XIDS[63].action
    assert xid.where == "PCI 0000:10:1c"
    assert of_kind(findings, "health-row-remap").where == "GPU0 (00000000:00:06.0)"


def test_xid_79_and_a_gpu_that_fell_off_the_bus_call_for_a_reboot() -> None:
    findings = rule_findings(judge(h=host_with_health(case_data("xid79_fallen_off_bus_akash209"))))
    assert of_kind(findings, "health-bad-xid").action == "reboot"
    assert of_kind(findings, "health-nvidia-smi-answers").action == "reboot"
    # the line without an Xid (NVIDIA/NVSentinel#155) means the same loss
    lost = text("fell_off_bus_no_xid_nvsentinel155", "dmesg.txt")
    assert most_disruptive(actions_in_text(lost)) == "reboot" == XIDS[79].action


def test_a_remapping_failure_goes_to_the_vendor() -> None:
    data = ecc_host_health()
    data["gpus"][1]["remapped_rows"]["failure"] = True
    remap = of_kind(rule_findings(judge(ecc=host_with_health(data))), "health-row-remap")
    assert remap.action == "contact-vendor"


def test_many_uncorrected_ecc_errors_go_to_the_hardware() -> None:
    data = ecc_host_health()
    data["gpus"][1]["ecc"]["volatile"]["uncorrected"] = 12
    ecc = of_kind(rule_findings(judge(ecc=host_with_health(data))), "health-ecc-uncorrected")
    assert ecc.action == "inspect-hw"


def test_the_healthy_twin_gives_no_finding() -> None:
    report = judge(twin=healthy(), pair=host_with_health(case_data("h200x2")))
    assert rule_findings(report) == []


def test_hosts_that_saw_the_same_fold_into_one_finding() -> None:
    report = judge(a=host_with_health(ecc_host_health()), b=host_with_health(ecc_host_health()))
    remap = of_kind(rule_findings(report), "health-row-remap")
    assert remap.hosts == ("a", "b")


def test_sw_power_cap_under_load_is_not_a_fault() -> None:
    """The real gpubench run on the lent H200: the SW power cap held the clocks under load
    (clock event sw_power_cap, no HW reason); and the health probe reading SW power cap (0x4)
    on a GPU drawing near its limit. Neither is a finding."""
    run = Run.from_dict(json.loads(GPUBENCH_RUN.read_text()))
    (gpu,) = run.hosts["local"].probes["gpubench"].data["gpus"]
    assert gpu["load"]["clock_events"] == ["sw_power_cap"]
    assert rule_findings(evaluate(pack(), run)) == []

    xml = text("h200x1_device", "nvidia-smi_-q_-x.xml")
    xml = xml.replace(
        "<clocks_event_reason_gpu_idle>Active<", "<clocks_event_reason_gpu_idle>Not Active<"
    ).replace(
        "<clocks_event_reason_sw_power_cap>Not Active<", "<clocks_event_reason_sw_power_cap>Active<"
    )
    data = health.build_data(
        xml,
        None,
        None,
        text("h200x1_device", "proc_driver_nvidia_version.txt"),
        ("dmesg", text("h200x1_device", "dmesg.txt"), {}),
    )
    assert data["gpus"][0]["clock_events"]["mask"] == "0x0000000000000004"
    assert rule_findings(judge(capped=host_with_health(data))) == []


def test_unjudged_rules_are_not_findings_but_one_line_per_cause() -> None:
    host = healthy()
    host["probes"]["health"].update(status="absent", ok=False, error="nvidia-smi not found")
    report = judge(**{"gpu-01": host, "gpu-02": healthy()})
    assert rule_findings(report) == []
    lines = not_judged_lines(report)
    assert len({line.cause for line in lines}) == len(lines)
    (absent,) = [line for line in lines if "health" in line.cause]
    assert absent.cause == "skipped: probe health absent: nvidia-smi not found"
    assert absent.hosts == ("gpu-01",)
    assert "health-row-remap" in absent.rules
    (no_net,) = [line for line in lines if "net" in line.cause]
    assert no_net.hosts == ("gpu-01", "gpu-02")  # one line for the cause, over both hosts


def test_every_pack_rule_names_its_action() -> None:
    raw = (Path(pack_path("inference"))).read_text()
    rules = pack()
    assert raw.count("\n    action: ") == len(rules) == 63
    assert {r.action for r in rules} <= set(ACTIONS)
    by_id = {r.id: r.action for r in rules}
    assert by_id["same-torch"] == "fix-config"
    assert by_id["live-no-missing-ranks"] == "restart-app"
    assert by_id["health-row-remap"] == "reset-gpu"


def test_a_rules_file_without_action_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "rules:\n"
        "  - id: torch-2-11\n"
        "    severity: warn\n"
        "    check: \"starts_with(torch.version, '2.11.')\"\n"
        "    fix: install torch 2.11\n"
    )
    (rule,) = load_rules(path, tuple(available_probes()))
    assert rule.action == "fix-config"


@pytest.mark.parametrize("word", ["reboots", "[reset-gpu]", "RESET-GPU"])
def test_an_unknown_action_is_refused_naming_the_file_and_line(tmp_path: Path, word: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "rules:\n"
        "  - id: torch-2-11\n"
        "    check: \"starts_with(torch.version, '2.11.')\"\n"
        "    fix: install torch 2.11\n"
        f"    action: {word}\n"
    )
    with pytest.raises(RuleFileError) as caught:
        load_rules(path, tuple(available_probes()))
    message = str(caught.value)
    assert message.startswith(f"{path}:5: rule 'torch-2-11': action ")
    assert ", ".join(ACTIONS) in message


# ------------------------------------------------------------------------------ the Xid catalog

COMMON = (
    13,
    31,
    32,
    43,
    45,
    48,
    61,
    62,
    63,
    64,
    68,
    69,
    74,
    79,
    92,
    94,
    95,
    109,
    119,
    120,
    140,
    154,
)


def test_the_catalog_covers_the_common_codes_and_every_code_of_the_captures() -> None:
    in_captures = {
        int(code)
        for case in GOLDEN_HEALTH.iterdir()
        if (case / "expected.json").is_file()
        for code in (
            json.loads((case / "expected.json").read_text())["probe_data"]["kernel_log"][
                "xid_counts"
            ]
            or {}
        )
    }
    assert in_captures >= {31, 43, 48, 63, 64, 79, 94}
    for code in (*COMMON, *in_captures):
        entry = XIDS[code]
        assert entry.meaning, code
        assert entry.mnemonic, code
        assert entry.action in ACTIONS, code


@pytest.mark.parametrize(
    ("code", "bucket", "action"),
    [
        (13, "RESTART_APP", "restart-app"),
        (43, "IGNORE", "none"),
        (48, "WORKFLOW_XID_48", "reset-gpu"),
        (64, "RESET_GPU", "reset-gpu"),
        (79, "RESTART_BM", "reboot"),
        (92, "IGNORE", "none"),
        (94, "RESTART_APP", "restart-app"),
        (95, "RESET_GPU", "reset-gpu"),
        (119, "RESET_GPU", "reset-gpu"),
    ],
)
def test_catalog_buckets_map_to_actions(code: int, bucket: str, action: str) -> None:
    assert (XIDS[code].nvidia_action, XIDS[code].action) == (bucket, action)


def test_xid_154_says_its_own_recovery_action() -> None:
    line = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x{}"
    assert xid_action(154, line.format("2 (Node Reboot Required)")) == "reboot"
    assert xid_action(154, line.format("1 (GPU Reset Required)")) == "reset-gpu"
    assert xid_action(154, line.format("4 (Drain and Reset)")) == "drain"
    assert xid_action(154) == "reset-gpu"
    assert xid_action(99999) == "inspect-hw"  # not in the catalog: look at the GPU


def test_a_stopped_rank_calls_for_restarting_the_job_naming_its_process() -> None:
    """The real run with a 1-rank NCCL job on the H200 (tests/probes/golden/live/h200x1), its
    problems as the live probe words a SIGSTOPped rank."""
    path = ROOT / "tests" / "probes" / "golden" / "live" / "h200x1" / "fleet_run_running.json"
    document = json.loads(path.read_text())
    document["hosts"]["local"]["probes"]["live"]["data"]["problems"] = {
        "missing_ranks": ["pid 468 (python3 -c ...) is stopped: its ranks and RAS are frozen"],
        "async_errors": [],
        "count_mismatches": [],
        "uncovered": [],
    }
    findings = rule_findings(evaluate(pack(), Run.from_dict(document)))
    (stopped,) = findings
    assert (stopped.kind, stopped.action, stopped.where) == (
        "live-no-missing-ranks",
        "restart-app",
        "pid 468",
    )
    assert stopped.hosts == ("local",)
