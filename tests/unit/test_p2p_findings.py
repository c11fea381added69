"""A matrix is one finding line, and a hardware limit is not a config error (issue 46, item 3).

`nvidia-smi topo -p2p r` codes: GNS, the GPU model does not support peer-to-peer (every GeForce
pair: the recorded loopback fleet's 2× RTX 5090 hosts, tests/probes/golden/real_run/
geforce8_loopback.json, and the real mixed 4-GPU capture), is a property of the board: a warning
that says what it costs, and such fleets pass the inference pack. CNS/TNS/NS (chipset, topology,
ACS/IOMMU/BIOS) are fixable and fail. The whole matrix stays in JSON, --details and the page."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from fleet.checks import evaluate
from fleet.findings.from_checks import rule_findings
from fleet.findings.model import Finding
from fleet.render.html.findings import findings_section
from fleet.render.terminal.findings import print_finding
from tests.cli.inprocess import REAL_RUN_DIR, invoke, write_run
from tests.recorded import GOLDEN_GPU, data, host_with_p2p, make_run, rtx_pcie_host
from tests.unit.helpers import pack_rules, verdict

GEFORCE8 = REAL_RUN_DIR / "geforce8_loopback.json"
HEALTHY_5090 = ("g03", "g04", "g06", "g08")


def findings_of(host: Any) -> dict[str, Finding]:
    report = evaluate(pack_rules(), make_run(box=host))
    return {f.kind: f for f in rule_findings(report)}


def shown(finding: Finding) -> list[str]:
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_finding(console, finding)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined, no-any-return]


def test_a_gns_matrix_is_one_warning_line_that_says_what_it_costs() -> None:
    found = findings_of(host_with_p2p({"PIX": "GNS", "NODE": "GNS", "SYS": "GNS"}))
    assert "p2p-all-pairs" not in found  # nothing to fix
    limit = found["p2p-gpu-model-limit"]
    assert (limit.severity, limit.action) == ("warning", "none")
    assert limit.what == "p2p-gpu-model-limit: 56 pairs: GNS × 56 (e.g. GPU0→GPU1, GPU0→GPU2)"
    assert len(limit.evidence["observed"]) == 56  # the JSON keeps every pair
    lines = shown(limit)
    assert len(lines) <= 3
    assert lines[0] == "! box: " + limit.what
    said = " ".join(" ".join(lines[1:]).split())
    assert "a hardware limit, no setting changes it" in said
    assert "NCCL goes through host memory" in said


def test_cns_and_tns_pairs_still_fail_as_one_line() -> None:
    found = findings_of(host_with_p2p({"PIX": "OK", "NODE": "CNS", "SYS": "TNS"}))
    assert "p2p-gpu-model-limit" not in found
    failed = found["p2p-all-pairs"]
    assert (failed.severity, failed.action) == ("error", "fix-config")
    assert failed.what == (
        "p2p-all-pairs: 48 pairs: TNS × 32 (e.g. GPU0→GPU4, GPU0→GPU5); "
        "CNS × 16 (e.g. GPU0→GPU2, GPU0→GPU3)"
    )
    assert len(shown(failed)) <= 4


def test_the_real_mixed_capture_fails_its_ns_pairs_and_warns_of_its_gns_ones() -> None:
    host = rtx_pcie_host()
    golden = json.loads((GOLDEN_GPU / "mixed4gpu_p2p_gns_ns" / "expected.json").read_text())
    data(host, "gpu")["p2p_read"] = golden["files"]["nvidia-smi_topo_-p2p_rw.txt"]
    data(host, "gpu")["gpu_count"] = 4
    report = evaluate(pack_rules(), make_run(box=host))
    assert verdict(report, "p2p-all-pairs", "box").observed == [
        f"GPU{a}→GPU{b}: NS"
        for a, b in [(0, 2), (0, 3), (1, 2), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1)]
    ]
    assert verdict(report, "p2p-gpu-model-limit", "box").observed == [
        "GPU0→GPU1: GNS",
        "GPU1→GPU0: GNS",
        "GPU2→GPU3: GNS",
        "GPU3→GPU2: GNS",
    ]


def geforce_fleet(tmp_path: Path, hosts: tuple[str, ...]) -> Path:
    document = json.loads(GEFORCE8.read_text())
    document["hosts"] = {h: o for h, o in document["hosts"].items() if h in hosts}
    return write_run(tmp_path / "run.json", document)


def test_a_gns_fleet_passes_the_inference_pack_with_the_limit_at_warning(tmp_path: Path) -> None:
    """No error rule fails: exit 0. (The verdict is `incomplete`, not `passed`, for what these
    captures lack: the health probe's XML, MIG and persistence columns; nothing failed.)"""
    run = geforce_fleet(tmp_path, HEALTHY_5090)
    checked = invoke(tmp_path, "check", "--run", str(run), "--json", "-")
    assert checked.exit_code == 0, checked.output
    document = json.loads(checked.stdout)
    assert document["outcome"] != "failed"
    assert document["summary"]["failed_error"] == 0
    limits = [f for f in document["findings"] if f["kind"] == "p2p-gpu-model-limit"]
    assert [(f["severity"], f["action"], f["hosts"]) for f in limits] == [
        ("warning", "none", list(HEALTHY_5090))
    ]
    said = invoke(tmp_path, "check", "--run", str(run), columns=80).stdout
    assert not said.startswith("✗")
    assert "! g[03-04,06,08]: p2p-gpu-model-limit: GPU0→GPU1: GNS; GPU1→GPU0: GNS" in said


def test_the_pack_fails_cns_and_tns_and_not_gns() -> None:
    gns = evaluate(
        pack_rules(), make_run(box=host_with_p2p({"PIX": "GNS", "NODE": "GNS", "SYS": "GNS"}))
    )
    fixable = evaluate(
        pack_rules(), make_run(box=host_with_p2p({"PIX": "OK", "NODE": "CNS", "SYS": "TNS"}))
    )
    assert (gns.outcome, fixable.outcome) == ("incomplete", "failed")  # incomplete: MIG unknown
    assert not gns.failures("error")
    assert [rule.id for rule, _ in fixable.failures("error")] == ["p2p-all-pairs"]


def test_a_cns_pair_on_one_5090_host_fails_the_pack(tmp_path: Path) -> None:
    document = json.loads(GEFORCE8.read_text())
    hosts = {h: document["hosts"][h] for h in HEALTHY_5090}
    hosts["g08"] = copy.deepcopy(hosts["g08"])
    hosts["g08"]["probes"]["gpu"]["data"]["p2p_read"]["GPU0"]["GPU1"] = "CNS"
    document["hosts"] = hosts
    run = write_run(tmp_path / "run.json", document)
    checked = invoke(tmp_path, "check", "--run", str(run), "--json", "-")
    assert checked.exit_code == 32, checked.output
    failed = [f for f in json.loads(checked.stdout)["findings"] if f["kind"] == "p2p-all-pairs"]
    assert [(f["hosts"], f["action"], f["what"]) for f in failed] == [
        (["g08"], "fix-config", "p2p-all-pairs: GPU0→GPU1: CNS")
    ]


def test_a_limit_that_differs_inside_a_cohort_is_still_a_finding(tmp_path: Path) -> None:
    """One 5090 host with P2P (a patched driver) among GNS twins: the cohort's odd host."""
    document = json.loads(GEFORCE8.read_text())
    hosts = {h: document["hosts"][h] for h in HEALTHY_5090}
    hosts["g08"] = copy.deepcopy(hosts["g08"])
    hosts["g08"]["probes"]["gpu"]["data"]["p2p_read"] = {
        "GPU0": {"GPU1": "OK"},
        "GPU1": {"GPU0": "OK"},
    }
    document["hosts"] = hosts
    run = write_run(tmp_path / "run.json", document)
    checked = invoke(tmp_path, "check", "--run", str(run), "--json", "-")
    findings = json.loads(checked.stdout)["findings"]
    odd = [f for f in findings if f["kind"] == "divergence" and f["hosts"] == ["g08"]]
    assert len(odd) == 1, findings
    assert "gpu.p2p_read.GPU0.GPU1" in odd[0]["evidence"]["facts"]


def test_details_and_the_page_list_every_pair(tmp_path: Path) -> None:
    host = host_with_p2p({"PIX": "NS", "NODE": "NS", "SYS": "NS"})
    limit = findings_of(host)["p2p-all-pairs"]
    page = findings_section([limit])
    assert "<details><summary>all 56</summary>" in page
    assert "GPU7→GPU6: NS" in page
    run = tmp_path / "box.json"
    write_run(run, make_run(box=host).to_dict())
    details = invoke(tmp_path, "check", "--run", str(run), "--details", columns=80).stdout
    assert "GPU7→GPU6: NS" in " ".join(details.split())
    brief = invoke(tmp_path, "check", "--run", str(run), columns=80).stdout
    assert "GPU7→GPU6" not in brief
