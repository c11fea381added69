"""Issue 5's Done-when: `fleet check --pack inference` over loopback sshd hosts with fake GPU stacks.

Each host is a real sshd whose SetEnv gives it a fake `nvidia-smi` replaying a real capture and a
stub `torch` (see test_gpu_stacks.py). The stub torch cannot start NCCL, so the allreduce probe is
absent everywhere: its band rules must be reported "skipped", never passed or failed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKES, ROOT
from tests.integration.conftest import FleetResult, run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration

GOLDEN_GPU = ROOT / "tests" / "probes" / "golden" / "gpu"
BIT_CHECK_FAILED = 32

# host → (nvidia-smi capture, torch stub, extra environment). Host names are unique in the
# session-wide sshd farm, hence the prefix.
BROKEN_FLEET = {
    "chk-nvl-1": ("h200x2_nvlink", "torch_h200_symm", {}),
    "chk-nvl-2": ("h200x2_nvlink", "torch_h200_symm", {}),
    "chk-p2p-off": ("h200x2_nvlink", "torch_h200_symm", {"NCCL_P2P_DISABLE": "1"}),
    "chk-bw-noarch": ("rtxpro6000x8_pcie", "torch_sm120_noarch", {}),
}
CLEAN_FLEET = {
    "clean-1": ("h200x2_nvlink", "torch_h200_symm", {}),
    "clean-2": ("h200x2_nvlink", "torch_h200_symm", {}),
    "clean-3": ("h200x2_nvlink", "torch_h200_symm", {}),
}
EXPECTED_FAILURES = {
    ("torch-arch-supported", "chk-bw-noarch"),
    ("nccl-p2p-not-disabled-on-nvlink", "chk-p2p-off"),
    ("nccl-transport-settings-uniform", "chk-p2p-off"),  # its NVLink twins leave it unset
}
ALLREDUCE_RULES = (
    "allreduce-correct",
    "allreduce-latency-nvlink",
    "allreduce-latency-pcie",
    "allreduce-busbw-nvlink",
    "allreduce-busbw-pcie",
)


def host_env(capture: str, stub: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": f"{FAKES / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "FLEET_FAKE_GPU_DIR": str(GOLDEN_GPU / capture),
        "PYTHONPATH": str(FAKES / "stubs" / stub),
        **extra,
    }


def check_fleet(
    farm: SshdFarm, tmp_path: Path, stacks: dict[str, Any], subnet: int, *options: str
) -> tuple[FleetResult, Path]:
    """`fleet check --pack inference OPTIONS` over `stacks`; the result's document is the run
    the check judged (its --json is the check document, which names the run)."""
    for index, (name, (capture, stub, extra)) in enumerate(stacks.items()):
        farm.start(name, f"127.0.{subnet}.{index + 1}", host_env(capture, stub, extra))
    known = farm.known_hosts(tmp_path / "known_hosts", list(stacks))
    hosts = {name: ssh_host(farm, name) for name in stacks}
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known)
    junit = tmp_path / "check.xml"
    result = run_fleet(
        tmp_path,
        "check",
        "--pack",
        "inference",
        "-i",
        str(inventory),
        "--quick",
        *options,
        "--junit",
        str(junit),
        "--json",
        str(tmp_path / "check.json"),
    )
    check = json.loads((tmp_path / "check.json").read_text())
    run = json.loads(Path(check["run"]["location"]).read_text())
    return dataclasses.replace(result, run=run), junit


@pytest.fixture(scope="module")
def broken(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetResult, Path]:
    # --details: every rule's per-host rows and fixes after the verdict and the findings
    return check_fleet(farm, tmp_path_factory.mktemp("check-broken"), BROKEN_FLEET, 12, "--details")


@pytest.fixture(scope="module")
def clean(farm: SshdFarm, tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetResult, Path]:
    return check_fleet(farm, tmp_path_factory.mktemp("check-clean"), CLEAN_FLEET, 13)


def junit_failures(junit: Path, prefix: str = "fleet.check.") -> set[tuple[str, str]]:
    """(rule, host) of every failed rule testcase; with prefix="fleet.findings.", (finding kind,
    host) of the findings suite's failures."""
    root = ET.parse(junit).getroot()
    return {
        ((case.get("classname") or "").removeprefix(prefix), case.get("name") or "")
        for case in root.iter("testcase")
        if case.find("failure") is not None and (case.get("classname") or "").startswith(prefix)
    }


def test_every_host_is_reached(broken: tuple[FleetResult, Path]) -> None:
    result, _ = broken
    assert {result.status(h) for h in BROKEN_FLEET} == {"ok"}, result.stderr


def test_exactly_the_broken_rules_fail_on_exactly_the_broken_hosts(
    broken: tuple[FleetResult, Path],
) -> None:
    result, junit = broken
    assert junit_failures(junit) == EXPECTED_FAILURES, result.stdout
    # the findings suite fails once per finding, on the two broken hosts only
    findings = junit_failures(junit, "fleet.findings.")
    assert {host for _, host in findings} == {"chk-bw-noarch", "chk-p2p-off"}, result.stdout
    root = ET.parse(junit).getroot()
    assert root.get("failures") == str(len(EXPECTED_FAILURES) + len(findings))


def test_exit_code_is_bit_32_alone(broken: tuple[FleetResult, Path]) -> None:
    result, _ = broken
    assert result.returncode == BIT_CHECK_FAILED, result.stdout + result.stderr


def test_fixes_are_printed_with_observed_values(broken: tuple[FleetResult, Path]) -> None:
    out = broken[0].stdout
    assert out.splitlines()[0] == "✗ check failed: chk-bw-noarch,chk-p2p-off fail 3 error rule(s)"
    assert "chk-bw-noarch: observed 12.0" in out
    assert "fix: torch 2.7.0+cu126 has no kernels for compute capability 12.0" in out
    assert "chk-p2p-off: observed 1" in out
    assert "fix: NCCL_P2P_DISABLE=1 on an NVLink host" in out
    assert "3 error failure(s) — torch-arch-supported on chk-bw-noarch;" in out


def test_allreduce_rules_are_skipped_not_passed(broken: tuple[FleetResult, Path]) -> None:
    root = ET.parse(broken[1]).getroot()
    suites = [s for s in root.findall("testsuite") if s.get("name") in ALLREDUCE_RULES]
    assert sorted(s.get("name") for s in suites) == sorted(ALLREDUCE_RULES)
    for suite in suites:
        cases = suite.findall("testcase")
        assert cases, suite.get("name")
        for case in cases:
            skipped = case.find("skipped")
            assert skipped is not None, (suite.get("name"), case.get("name"))
            assert "probe allreduce absent" in (skipped.get("message") or "")


def test_unreported_capture_fields_are_unknown(broken: tuple[FleetResult, Path]) -> None:
    """The RTX PRO capture has no persistence/MIG columns: unknown there, not a pass."""
    root = ET.parse(broken[1]).getroot()
    cases = {
        (suite.get("name"), case.get("name")): case
        for suite in root.findall("testsuite")
        for case in suite.findall("testcase")
    }
    for rule in ("persistence-mode", "no-mig"):
        skipped = cases[(rule, "chk-bw-noarch")].find("skipped")
        assert skipped is not None
        assert (skipped.get("message") or "").startswith("unknown")
        assert len(cases[(rule, "chk-nvl-1")]) == 0  # passed: an empty test case


def test_clean_fleet_exits_0_but_is_not_called_passed(clean: tuple[FleetResult, Path]) -> None:
    """No rule failed, but the allreduce rules could not be judged (the stub torch has no NCCL):
    exit 0, and the verdict says what was not judged rather than "passed"."""
    result, junit = clean
    assert result.returncode == 0, result.stdout + result.stderr
    assert junit_failures(junit) == set()
    assert result.stdout.startswith("? check incomplete: no error failures, but "), result.stdout
    assert "check passed" not in result.stdout
    # every rule that reads the allreduce probe, said once for the three hosts
    said = re.findall(
        r"not judged: \d+ rules on clean-\[1-3\] \(skipped: probe allreduce absent", result.stdout
    )
    assert len(said) == 1, result.stdout
