"""Drift over a real loopback fleet: probe, change one host's torch stub, probe again, diff."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import FAKES
from tests.integration.conftest import run_fleet, ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration
PROBES = "system,packages,torch,imports"
SYMM = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"


def upgrade_stub(stub: Path, old: str, new: str) -> None:
    """Rewrite the stub's version in its package and its dist-info, as a pip upgrade would."""
    init = stub / "torch" / "__init__.py"
    init.write_text(init.read_text().replace(old, new))
    dist_info = next(stub.glob("torch-*.dist-info"))
    metadata = dist_info / "METADATA"
    metadata.write_text(metadata.read_text().replace(old, new))


def test_one_upgraded_host_is_exactly_the_drift(farm: SshdFarm, tmp_path: Path) -> None:
    names = ["drift-1", "drift-2", "drift-3"]
    stubs = {}
    for index, name in enumerate(names):
        stubs[name] = shutil.copytree(FAKES / "stubs" / "torch_h200_symm", tmp_path / name)
        shutil.copy(FAKES / "stubs" / "fake_torch.py", tmp_path / "fake_torch.py")
        farm.start(name, f"127.0.9.{index + 1}", {"PYTHONPATH": str(stubs[name])})
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, {n: ssh_host(farm, n) for n in names}, known
    )
    first = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", PROBES)
    assert first.returncode == 0, first.stdout

    same = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", PROBES, "--baseline", "latest")
    assert same.returncode == 0, same.stdout
    assert "drift from" in same.stdout
    assert "none" in same.stdout

    upgrade_stub(stubs["drift-2"], "2.11.0+cu130", "2.12.0+cu130")
    second = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", PROBES)
    assert second.returncode == 0

    diff = run_fleet(tmp_path, "diff", "previous", "latest", "--json", "-")
    assert diff.returncode == 16, diff.stderr
    document = json.loads(diff.stdout)
    assert document["changed_hosts"] == ["drift-2"]
    changes = {(c["fact"], c["old"], c["new"]) for c in document["changes"]}
    assert changes == {
        ("packages.packages.torch", "2.11.0+cu130", "2.12.0+cu130"),
        ("torch.version", "2.11.0+cu130", "2.12.0+cu130"),
        ("imports.results.torch.version", "2.11.0+cu130", "2.12.0+cu130"),
        (f'imports.results."{SYMM}".version', "2.11.0+cu130", "2.12.0+cu130"),
    }
    unchanged = run_fleet(tmp_path, "diff", "latest", "latest")
    assert unchanged.returncode == 0
    assert "none" in unchanged.stdout


def test_a_limited_run_against_a_full_baseline_compares_only_its_hosts(
    farm: SshdFarm, tmp_path: Path
) -> None:
    """Issue 24 item 12: probing two hosts of an inventory against a full run reported the
    others "gone" (exit 16, a false alarm for a deploy gate). The run records its --limit; the
    hosts it did not select are left out, and said to be."""
    names = ["sel-1", "sel-2", "sel-3", "sel-4"]
    for index, name in enumerate(names):
        farm.start(name, f"127.0.10.{index + 1}")
    known = farm.known_hosts(tmp_path / "known_hosts", names)
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, {n: ssh_host(farm, n) for n in names}, known
    )
    full = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system")
    assert full.returncode == 0, full.stdout
    assert "limit" not in full.document

    limited = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--limit", "sel-[1-2]",
        "--baseline", "latest",
    )  # fmt: skip
    assert limited.returncode == 0, limited.stdout
    assert limited.document["limit"] == "sel-[1-2]"
    assert "gone" not in limited.stdout
    text = " ".join(limited.stdout.split())
    assert "left out, not selected by the new run's --limit sel-[1-2]: sel-[3-4]" in text

    both = run_fleet(tmp_path, "diff", "previous", "latest", "-i", str(inventory), "--json", "-")
    assert both.returncode == 0, both.stdout
    document = json.loads(both.stdout)
    assert (document["removed_hosts"], document["left_out"]) == ([], ["sel-3", "sel-4"])

    narrowed = run_fleet(tmp_path, "diff", "previous", "previous", "--limit", "sel-1")
    assert narrowed.returncode == 0, narrowed.stdout
    assert "left out, not selected by --limit sel-1: sel-[2-4]" in " ".join(narrowed.stdout.split())
