"""Host keys: unknown (fingerprint shown), changed, wrong client key. No prompt, known_hosts
byte-identical afterwards, and a changed key is never accepted, even with --accept-new."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import start_fleet
from tests.integration.conftest import ssh_host, write_inventory
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults


def fingerprint(farm: SshdFarm, name: str) -> str:
    pub = farm.root / name / "host_key.pub"
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[1]


def test_host_key_faults_refuse_without_prompt_and_leave_known_hosts_alone(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    unknown, changed, wrong_key, good = (
        fresh_host(p) for p in ("unknown", "changed", "wrongkey", "good")
    )
    known_hosts = tmp_path / "known_hosts"
    farm.known_hosts(known_hosts, [wrong_key, good])
    imposter = farm.hosts[good].host_key_pub  # what known_hosts wrongly holds for `changed`
    changed_host = farm.hosts[changed]
    with known_hosts.open("a") as handle:
        handle.write(f"[{changed_host.address}]:{changed_host.port} {imposter}\n")
    before = known_hosts.read_bytes()
    hosts = {
        unknown: ssh_host(farm, unknown),
        changed: ssh_host(farm, changed),
        wrong_key: ssh_host(farm, wrong_key, identity_file=str(farm.wrong_key)),
        good: ssh_host(farm, good),
    }
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known_hosts)

    first = start_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system").finish(60)

    assert first.status(good) == "ok"
    assert first.status(unknown) == "hostkey_unknown"
    assert fingerprint(farm, unknown) in first.host(unknown)["error"]
    assert first.status(changed) == "hostkey_changed"
    assert fingerprint(farm, changed) in first.host(changed)["error"]
    assert first.status(wrong_key) == "auth_failed"
    assert first.returncode == 4
    assert known_hosts.read_bytes() == before
    assert not (first.state_dir / "fleet" / "known_hosts").exists()

    second = start_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "--accept-new"
    ).finish(60)

    assert second.status(changed) == "hostkey_changed"  # never, not even with --accept-new
    assert second.status(unknown) == "ok"  # recorded in fleet's own file, not the user's
    assert second.status(wrong_key) == "auth_failed"
    assert known_hosts.read_bytes() == before
    recorded = (second.state_dir / "fleet" / "known_hosts").read_text()
    assert farm.hosts[unknown].host_key_pub.split()[1] in recorded
    assert farm.hosts[changed].host_key_pub.split()[1] not in recorded
    for text in (first.stdout, first.stderr, second.stdout, second.stderr):
        assert "Traceback" not in text
        assert "(yes/no" not in text
