"""`fleet check` as a user runs it: saved runs, verdicts, JUnit, JSON, exit codes, bad rules."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.helpers import invoke_fleet as fleet
from tests.helpers import local_inventory
from tests.probes.health_cases import real_run_with_health
from tests.recorded import REAL_RUN, variant_fleet


def saved_variant_run(tmp_path: Path) -> Path:
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(variant_fleet().to_dict()))
    return path


def test_saved_run_with_broken_hosts_exits_32_with_fixes_and_junit(tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    done = fleet(
        tmp_path,
        "check",
        "--details",
        "--run",
        str(saved_variant_run(tmp_path)),
        "--junit",
        str(junit),
    )
    assert done.returncode == 32, done.stderr
    assert "fix: torch 2.7.0+cu126 has no kernels for compute capability 12.0" in done.stdout
    assert "fix: NCCL_P2P_DISABLE=1 on an NVLink host" in done.stdout
    assert "✗ check failed: p2p-off,slow,sm120 fail 5 error rule(s)" in done.stdout
    assert "5 error failure(s) — " in done.stdout  # the --details summary, by rule
    root = ET.parse(junit).getroot()
    # the findings first (one test case each: the folded answer), then a case per rule and host
    findings = root.find("testsuite[@name='findings']")
    assert findings is not None
    failed_findings = int(findings.get("failures") or 0)
    assert failed_findings == 3, ET.tostring(findings).decode()  # sm120, p2p-off, slow
    assert root.get("failures") == str(5 + failed_findings)
    assert len(root.findall("testsuite/testcase/failure")) == 5 + failed_findings


def test_clean_saved_run_exits_0(tmp_path: Path) -> None:
    clean = tmp_path / "clean.json"  # the recorded H200 run, with a health probe result added
    clean.write_text(json.dumps(real_run_with_health()))
    done = fleet(tmp_path, "check", "--run", str(clean), "--pack", "inference")
    assert done.returncode == 0, done.stdout + done.stderr
    # The recording predates the live and net probes: their rules are the only ones not judged.
    assert "? check incomplete: no error failures" in done.stdout
    not_judged = done.stdout.split("not judged:")[1].split("verdicts (rule")[0]
    assert " ".join(not_judged.split()) == (
        "12 rules on local (skipped: probes net, live were not run)"
    )


def test_json_format_is_a_check_document(tmp_path: Path) -> None:
    done = fleet(tmp_path, "check", "--run", str(saved_variant_run(tmp_path)), "--json", "-")
    assert done.returncode == 32
    document = json.loads(done.stdout)
    assert document["schema"] == "fleet.check/3"
    assert document["passed"] is False
    arch = next(r for r in document["rules"] if r["id"] == "torch-arch-supported")
    assert arch["hosts"]["sm120"]["verdict"] == "fail"
    assert arch["hosts"]["h200-a"]["verdict"] == "pass"


def test_warnings_alone_do_not_set_bit_32(tmp_path: Path) -> None:
    rules = tmp_path / "warn.yaml"
    rules.write_text('rules:\n  - {id: w, severity: warn, check: "`false`", fix: "just so"}\n')
    done = fleet(tmp_path, "check", "--details", "--run", str(REAL_RUN), "--rules", str(rules))
    assert done.returncode == 0, done.stdout
    assert "! warn w" in done.stdout
    assert "fix: just so" in done.stdout


def test_bad_rules_file_exits_2_before_probing(tmp_path: Path) -> None:
    rules = tmp_path / "bad.yaml"
    rules.write_text("rules:\n  - id: a\n    check: torhc.version\n    fix: f\n")
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = fleet(tmp_path, "check", "--details", "-i", inventory, "--rules", str(rules))
    assert done.returncode == 2
    assert f"{rules}:3: rule 'a': 'check:' reads 'torhc'" in done.stderr
    assert not (tmp_path / "state").exists()  # nothing probed, nothing saved


def test_unknown_pack_and_missing_run_exit_2(tmp_path: Path) -> None:
    done = fleet(tmp_path, "check", "--details", "--run", str(REAL_RUN), "--pack", "training")
    assert done.returncode == 2
    assert "packs: health, inference" in done.stderr
    done = fleet(tmp_path, "check", "--details", "--run", "latest")
    assert done.returncode == 2
    assert "no latest run" in done.stderr


def test_probing_check_saves_the_run_and_judges_it(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(
        "rules:\n"
        '  - {id: has-cpus, check: "system.cpu_count > `0`", fix: none}\n'
        '  - {id: many-cpus, check: "system.cpu_count > `100000`",'
        ' observed: system.cpu_count, fix: "only {observed} CPUs"}\n'
    )
    inventory = local_inventory(tmp_path, here={"transport": "local", "python": sys.executable})
    done = fleet(
        tmp_path, "check", "--details", "-i", inventory, "-p", "system", "--rules", str(rules)
    )
    assert done.returncode == 32, done.stdout + done.stderr
    assert "✓ pass has-cpus" in done.stdout
    assert "fix: only " in done.stdout
    saved = list((tmp_path / "state" / "fleet" / "runs").glob("*.json"))
    assert len(saved) == 1
    again = fleet(tmp_path, "check", "--details", "--run", "latest", "--rules", str(rules))
    assert again.returncode == 32
    assert "✗ fail many-cpus" in again.stdout


def test_a_saved_run_is_checked_on_the_hosts_limit_selects(tmp_path: Path) -> None:
    """`fleet check --run RUN -l PATTERN` judges those hosts of the run only (it judged them all)."""
    run = str(saved_variant_run(tmp_path))
    done = fleet(tmp_path, "check", "--run", run, "-l", "h200-*", "--json", "-")
    assert done.returncode == 0, done.stderr
    judged = {h for rule in json.loads(done.stdout)["rules"] for h in rule["hosts"]}
    assert judged == {"h200-a", "h200-b", "h200-c"}
    broken = fleet(tmp_path, "check", "--run", run, "-l", "h200-*,sm120", "--json", "-")
    assert broken.returncode == 32
    assert json.loads(broken.stdout)["passed"] is False
    nothing = fleet(tmp_path, "check", "--run", run, "-l", "gpu-9*")
    assert nothing.returncode == 2
    assert "--limit pattern 'gpu-9*' matches no host or group" in nothing.stderr
