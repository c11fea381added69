"""`fleet probe` end to end against real sshd hosts on loopback."""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path

import pytest

from fleet.store import expand_payloads
from tests.conftest import FAKES, ROOT
from tests.integration.conftest import (
    FleetResult,
    closed_port,
    divergence_block,
    run_fleet,
    ssh_host,
    write_inventory,
)
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration

STUB_OLD_TORCH = FAKES / "stubs" / "torch_sm120_noarch"
CHEAP_PROBES = "system,packages"


def test_eight_hosts_two_divergent_one_unreachable(farm: SshdFarm, tmp_path: Path) -> None:
    names = [f"node-{i}" for i in range(1, 9)]
    for index, name in enumerate(names):
        env = {"PYTHONPATH": str(STUB_OLD_TORCH)} if name in ("node-3", "node-7") else {}
        farm.start(name, f"127.0.0.{index + 2}", env)
    hosts = {n: ssh_host(farm, n) for n in names}
    hosts["node-dead"] = {"address": "127.0.0.1", "port": closed_port()}
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, hosts, farm.known_hosts(tmp_path / "known_hosts", names)
    )

    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "--probes", CHEAP_PROBES)

    assert result.returncode & 4, result.stderr
    assert result.status("node-dead") == "unreachable"
    assert "connection refused" in result.host("node-dead")["error"]
    assert all(result.status(n) == "ok" for n in names), result.stdout
    block = divergence_block(result.full_diff(), "packages.packages.torch")
    assert "node-[3,7]" in block
    assert "node-1" not in block
    versions = {n: result.host(n)["probes"]["packages"]["data"]["packages"]["torch"] for n in names}
    assert versions["node-3"] == versions["node-7"] != versions["node-1"]


@pytest.fixture
def lone_host(farm: SshdFarm, request: pytest.FixtureRequest) -> str:
    """A fresh sshd host per test, on its own address."""
    name = request.node.name.replace("test_", "")[:40].replace("_", "-")
    farm.start(name, f"127.0.1.{len(farm.hosts) + 1}")
    return name


def probe_one(
    farm: SshdFarm,
    tmp_path: Path,
    name: str,
    *extra: str,
    known: list[str] | None = None,
    **settings: object,
) -> FleetResult:
    known_hosts = farm.known_hosts(tmp_path / "known_hosts", known if known is not None else [name])
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, {name: ssh_host(farm, name, **settings)}, known_hosts
    )
    return run_fleet(tmp_path, "probe", "-i", str(inventory), "--probes", "system", *extra)


def test_unknown_host_key_is_refused_with_its_fingerprint(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    result = probe_one(farm, tmp_path, lone_host, known=[])
    assert result.returncode == 4
    assert result.status(lone_host) == "hostkey_unknown"
    error = result.host(lone_host)["error"]
    assert "SHA256:" in error


def test_changed_host_key_is_refused_and_never_accepted(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    host = farm.hosts[lone_host]
    other_key = next(
        h.host_key_pub for h in farm.hosts.values() if h.host_key_pub != host.host_key_pub
    )
    (tmp_path / "known_hosts").write_text(f"[{host.address}]:{host.port} {other_key}\n")
    inventory = write_inventory(
        tmp_path / "inv.yaml",
        farm,
        {lone_host: ssh_host(farm, lone_host)},
        tmp_path / "known_hosts",
    )
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--accept-new")
    assert result.status(lone_host) == "hostkey_changed"
    assert not (result.state_dir / "fleet" / "known_hosts").exists()


def test_accept_new_records_unknown_key_then_verifies_it(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    first = probe_one(farm, tmp_path, lone_host, "--accept-new", known=[])
    assert first.status(lone_host) == "ok"
    recorded = first.state_dir / "fleet" / "known_hosts"
    assert farm.hosts[lone_host].host_key_pub.split()[1] in recorded.read_text()
    assert oct(recorded.stat().st_mode & 0o777) == "0o600"
    second = probe_one(
        farm, tmp_path, lone_host, known=[]
    )  # no --accept-new: fleet's file trusts it
    assert second.status(lone_host) == "ok"


def test_wrong_client_key_is_auth_failed(farm: SshdFarm, tmp_path: Path, lone_host: str) -> None:
    result = probe_one(farm, tmp_path, lone_host, identity_file=str(farm.wrong_key))
    assert result.status(lone_host) == "auth_failed"
    assert result.returncode == 4


def test_missing_interpreter_is_no_python(farm: SshdFarm, tmp_path: Path, lone_host: str) -> None:
    result = probe_one(farm, tmp_path, lone_host, python="/nonexistent/bin/python3")
    assert result.status(lone_host) == "no_python"
    assert "/nonexistent/bin/python3" in result.host(lone_host)["error"]


def test_nothing_is_left_on_the_host(farm: SshdFarm, tmp_path: Path, lone_host: str) -> None:
    home = farm.hosts[lone_host].home  # the session's HOME and TMPDIR
    result = probe_one(farm, tmp_path, lone_host)
    assert result.status(lone_host) == "ok"
    assert list(home.iterdir()) == []


def test_jump_host_tunnels_to_target(farm: SshdFarm, tmp_path: Path) -> None:
    bastion = farm.start("bastion-1", "127.0.2.1", LogLevel="DEBUG1")
    target = farm.start("behind-1", "127.0.2.2")
    known = farm.known_hosts(tmp_path / "known_hosts", ["bastion-1", "behind-1"])
    hosts = {
        "bastion-1": {"address": bastion.address, "port": bastion.port},
        "behind-1": {"address": target.address, "port": target.port, "jump": "bastion-1"},
    }
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known)
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system")
    assert result.status("behind-1") == "ok", result.stdout
    assert result.status("bastion-1") == "ok"
    log = (farm.root / "bastion-1" / "sshd.log").read_text()
    assert "direct-tcpip" in log
    assert f"to {target.address} port {target.port}" in log


def test_saved_run_is_private_and_json_matches_schema(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    result = probe_one(farm, tmp_path, lone_host)
    runs = list((result.state_dir / "fleet" / "runs").glob("*.json"))
    assert len(runs) == 1
    assert oct(runs[0].stat().st_mode & 0o777) == "0o600"
    assert oct(runs[0].parent.stat().st_mode & 0o777) == "0o700"
    saved = expand_payloads(json.loads(runs[0].read_text()))  # payloads are stored once
    assert saved["schema"] == "fleet.run/2"
    assert set(saved) >= {"fleet_version", "started", "finished", "bundle_sha256", "hosts"}
    probe = saved["hosts"][lone_host]["probes"]["system"]
    assert set(probe) >= {"ok", "data", "error", "elapsed_s"}
    assert probe["data"]["python"]["version"]


def test_secret_canary_never_leaves_the_host(farm: SshdFarm, tmp_path: Path) -> None:
    canary = "hf_CANARY" + "x7" * 15
    farm.start(
        "canary-1",
        "127.0.3.1",
        {"HF_TOKEN": canary, "NCCL_CANARY_TOKEN": canary, "NCCL_DEBUG": "INFO"},
    )
    known = farm.known_hosts(tmp_path / "known_hosts", ["canary-1"])
    inventory = write_inventory(
        tmp_path / "inv.yaml", farm, {"canary-1": ssh_host(farm, "canary-1")}, known
    )
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system,packages,nccl")
    assert result.status("canary-1") == "ok", result.stdout
    assert result.host("canary-1")["probes"]["nccl"]["data"]["env"]["NCCL_DEBUG"] == "INFO"
    everything = [result.stdout, result.stderr, json.dumps(result.document)]
    everything += [p.read_text() for p in result.state_dir.rglob("*") if p.is_file()]
    assert not any(canary in text for text in everything)
    assert "NCCL_CANARY_TOKEN" in json.dumps(
        result.document
    )  # the name is a fact, the value masked


def test_hostile_inventory_is_rejected_before_connecting(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    log = farm.hosts[lone_host].log
    assert log is not None
    before = log.read_text()
    inventory = write_inventory(
        tmp_path / "inv.yaml",
        farm,
        {lone_host: ssh_host(farm, lone_host), "evil": {"address": "127.0.0.1;touch /tmp/pwned"}},
        tmp_path / "known_hosts",
    )
    result = run_fleet(tmp_path, "probe", "-i", str(inventory))
    assert result.returncode == 2
    assert "inv.yaml:" in result.stderr
    assert "127.0.0.1;touch /tmp/pwned" in result.stderr
    assert log.read_text() == before  # no connection was even attempted
    assert not os.path.exists("/tmp/pwned")


def test_handshakes_dropped_by_maxstartups_are_retried(farm: SshdFarm, tmp_path: Path) -> None:
    """sshd drops unauthenticated connections beyond MaxStartups; fleet backs off and retries."""
    server = farm.start("throttled-1", "127.0.5.1", MaxStartups="1:100:1")
    names = [f"alias-{i}" for i in range(8)]
    (tmp_path / "known_hosts").write_text(server.known_hosts_line() + "\n")
    hosts = {n: {"address": server.address, "port": server.port} for n in names}
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, tmp_path / "known_hosts")
    result = run_fleet(tmp_path, "probe", "-i", str(inventory), "-p", "system")
    assert [result.status(n) for n in names] == ["ok"] * len(names), result.stdout
    assert "MaxStartups" in (farm.root / "throttled-1" / "sshd.log").read_text()


def test_errors_and_hints_show_at_80_columns(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    """Issue 24 item 9: at 80 columns a fingerprint or a path too wide for the table's column
    used to drop `error / hint`, and the hints (`--accept-new`, `try: ssh …`) showed nowhere.
    Each way of failing is now printed under the table, its error then its hint, wrapped between
    words with a hanging indent: a line wider than 80 columns is one word alone on it."""
    known_hosts = farm.known_hosts(tmp_path / "known_hosts", [])
    hosts = {
        lone_host: ssh_host(farm, lone_host),
        "dead": {"address": "127.0.0.1", "port": closed_port()},
    }
    inventory = write_inventory(tmp_path / "inv.yaml", farm, hosts, known_hosts)
    result = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", env={"COLUMNS": "80"}
    )
    assert result.returncode == 4, result.stderr
    words = " ".join(result.stdout.split())
    for name in (lone_host, "dead"):
        error, hint = result.host(name)["error"], result.host(name)["hint"]
        assert " ".join(error.split()) in words, result.stdout
        assert f"hint: {' '.join(hint.split())}" in words, result.stdout
    assert "--accept-new" in words
    assert "try: ssh -p" in words
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 or len(line.split()) == 1 for line in lines), result.stdout
    assert not any(line.startswith(("SHA256:", "/", "refused")) for line in lines), result.stdout


def adhoc_probe(
    farm: SshdFarm, tmp_path: Path, name: str, *extra: str, env: dict[str, str] | None = None
) -> FleetResult:
    """`fleet probe -H ADDRESS` with the farm host's port, this user and this python; no
    ~/.ssh/config, and a HOME with no ~/.ssh in it (unless `env` says otherwise)."""
    host = farm.hosts[name]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return run_fleet(
        tmp_path, "probe", "-H", host.address, "--port", str(host.port),
        "--user", getpass.getuser(), "--python", sys.executable, "--ssh-config", "none",
        "-p", "system", *extra,
        env={"HOME": str(home), "SSH_AUTH_SOCK": "", **(env or {})},
    )  # fmt: skip


def test_identity_and_known_hosts_name_the_key_and_trust_of_adhoc_hosts(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    """Issue 24 item 14: with -H there was no way to name a key or a known_hosts file."""
    known = farm.known_hosts(tmp_path / "known_hosts", [lone_host])
    address = farm.hosts[lone_host].address
    result = adhoc_probe(
        farm, tmp_path, lone_host, "--identity", str(farm.client_key), "--known-hosts", str(known)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.status(address) == "ok"

    untrusted = adhoc_probe(farm, tmp_path, lone_host, "--identity", str(farm.client_key))
    assert untrusted.status(address) == "hostkey_unknown"  # ~/.ssh/known_hosts: empty HOME

    wrong = adhoc_probe(
        farm, tmp_path, lone_host, "--identity", str(farm.wrong_key), "--known-hosts", str(known)
    )
    assert wrong.status(address) == "auth_failed"
    assert (
        f"refused our key(s): permission denied: user {getpass.getuser()}, offered "
        in (wrong.host(address)["error"])
    )
    assert str(farm.wrong_key) in wrong.host(address)["error"]


def test_a_login_with_no_key_to_offer_says_so(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    """No agent and no ~/.ssh/id_*: the error said "refused our key … identity ssh defaults"
    though no key was offered at all."""
    known = farm.known_hosts(tmp_path / "known_hosts", [lone_host])
    address = farm.hosts[lone_host].address
    result = adhoc_probe(farm, tmp_path, lone_host, "--known-hosts", str(known))
    assert result.status(address) == "auth_failed"
    error = result.host(address)["error"]
    assert "fleet had no key to offer" in error
    assert "no default key file in ~/.ssh; no ssh-agent (SSH_AUTH_SOCK is not set)" in error
    assert "refused our key" not in error
    assert "--identity FILE" in result.host(address)["hint"]


def test_identity_and_known_hosts_go_with_adhoc_hosts_only(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("")
    done = run_fleet(tmp_path, "hosts", "-i", str(ROOT / "inventory" / "local.yaml"),
                     "--identity", str(key))  # fmt: skip
    assert done.returncode == 2
    assert "--identity set(s) the hosts of -H only" in done.stderr
    missing = run_fleet(tmp_path, "hosts", "-H", "gpu-01", "--known-hosts", str(tmp_path / "no"))
    assert missing.returncode == 2
    assert f"--known-hosts {tmp_path / 'no'}: no such file" in missing.stderr


def test_baseline_latest_of_adhoc_hosts_is_their_last_run(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    """Issue 46, item 7: `-H HOST --baseline latest` meant the latest run of this machine's
    built-in inventory; it is the last run of the same -H hosts."""
    known = farm.known_hosts(tmp_path / "known_hosts", [lone_host])
    keys = ("--identity", str(farm.client_key), "--known-hosts", str(known))
    first = adhoc_probe(farm, tmp_path, lone_host, *keys)
    assert first.returncode == 0, first.stdout + first.stderr
    again = adhoc_probe(farm, tmp_path, lone_host, *keys, "--baseline", "latest")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "drift from " in again.stdout


def test_hints_give_the_real_command_and_call_a_nodeset_no_inventory(
    farm: SshdFarm, tmp_path: Path, lone_host: str
) -> None:
    """Issue 46, item 8: a refused login's finding gave `try: ssh USER@HOST true` where the
    host's own hint names the real command; `-H … --baseline latest` with no run before said
    `no latest run of inventory -H …`."""
    known = farm.known_hosts(tmp_path / "known_hosts", [lone_host])
    host = farm.hosts[lone_host]
    wrong = adhoc_probe(
        farm, tmp_path, lone_host, "--identity", str(farm.wrong_key), "--known-hosts", str(known)
    )
    words = " ".join(wrong.stdout.split())
    assert f"try: ssh -p {host.port} -i {farm.wrong_key} " in words
    assert f" {getpass.getuser()}@{host.address} true" in words
    assert "USER@HOST" not in words
    fresh = tmp_path / "fresh"  # no run saved there yet
    fresh.mkdir()
    first = adhoc_probe(farm, fresh, lone_host, "--no-save", "--baseline", "latest")
    assert first.returncode == 2
    assert f"there is no latest run of hosts -H {host.address}" in first.stderr
    assert "inventory -H" not in first.stderr
