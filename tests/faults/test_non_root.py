"""A run as an ordinary user on both sides: the controller runs as that user (runuser), and so
does the login on the host. Nothing needs root or sudo, and nothing is left in that user's HOME or
the temporary folders afterwards."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.sshd import SshdFarm, find_sshd

pytestmark = [pytest.mark.faults, pytest.mark.slow]

USER = "fleetfault"
CONTROLLER_MODULES = ("asyncssh", "click", "yaml", "rich")


def as_user(
    *command: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", USER, "--", "env", *(f"{k}={v}" for k, v in (env or {}).items())]
    return subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    if os.geteuid() != 0:
        pytest.skip("creating a second user needs root (CI runs as root)")
    created = subprocess.run(["id", USER], capture_output=True).returncode != 0
    if created:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", USER], check=True, capture_output=True)
        # a new account is locked ("!" in shadow) and sshd refuses locked accounts even for keys:
        # "*" means no password login, but not locked
        subprocess.run(["usermod", "-p", "*", USER], check=True, capture_output=True)
    yield pwd.getpwnam(USER)
    if created:
        subprocess.run(["userdel", "-r", USER], capture_output=True)


def user_python(workspace: Path) -> tuple[str, str]:
    """(interpreter, PYTHONPATH) with which the user can run fleet: this Python if the user can
    read it, else the system Python with a readable copy of fleet's dependencies."""
    path = str(ROOT)
    probe = ["-c", "import " + ", ".join(CONTROLLER_MODULES)]
    if as_user(sys.executable, *probe, env={"PYTHONPATH": path}).returncode == 0:
        return sys.executable, path
    system = shutil.which("python3", path="/usr/bin:/bin")
    if (
        not system
        or subprocess.run(
            [system, "-c", f"import sys; assert sys.version_info[:2] == {sys.version_info[:2]}"]
        ).returncode
    ):
        pytest.skip(f"{sys.executable} is not readable by {USER} and no matching system python3")
    deps = workspace / "deps"  # this Python lives where the user cannot read (e.g. /root)
    deps.mkdir()
    for source in third_party_files():
        target = deps / source.name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
    return system, f"{path}:{deps}"


def third_party_files() -> set[Path]:
    """The top-level files and packages of site-packages that the controller imports."""
    import importlib
    import site

    for module in ("fleet.cli", "fleet.transport.ssh"):
        importlib.import_module(module)
    roots = [Path(p) for p in site.getsitepackages()]
    found = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        for root in roots:
            if file and Path(file).is_relative_to(root):
                found.add(root / Path(file).relative_to(root).parts[0])
    return found


def test_non_root_user_on_both_sides(user: pwd.struct_passwd) -> None:
    sshd = find_sshd()
    if sshd is None:
        pytest.skip("no sshd here: apt-get install -y openssh-server")
    workspace = Path(tempfile.mkdtemp(prefix="fleet-nonroot-"))
    os.chmod(workspace, 0o755)
    farm = SshdFarm(workspace / "farm", sshd)
    try:
        python, pythonpath = user_python(workspace)
        marker = workspace / ".started"
        marker.touch()
        time.sleep(0.01)
        home = Path(user.pw_dir)
        farm.start("plain-user", "127.0.57.1", {"HOME": str(home), "TMPDIR": "/tmp"})
        host = farm.hosts["plain-user"]
        inventory = workspace / "inv.yaml"
        inventory.write_text(
            yaml.safe_dump(
                {
                    "defaults": {
                        "user": USER,
                        "identity_file": str(farm.client_key),
                        "known_hosts": str(farm.known_hosts(workspace / "known_hosts")),
                        "python": python,
                        "connect_timeout": 10,
                    },
                    "hosts": {"plain-user": {"address": host.address, "port": host.port}},
                }
            )
        )
        for path in (workspace, farm.root):
            subprocess.run(["chown", "-R", f"{USER}:", str(path)], check=True)
            os.chmod(path, 0o755)

        done = as_user(
            python, "-m", "fleet", "probe", "-i", str(inventory), "-p", "system,packages,nccl",
            "--json", str(workspace / "run.json"),
            env={"PYTHONPATH": pythonpath, "XDG_STATE_HOME": str(workspace / "state"),
                 "HOME": str(home)},
        )  # fmt: skip

        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        document = yaml.safe_load((workspace / "run.json").read_text())
        outcome = document["hosts"]["plain-user"]
        assert outcome["status"] == "ok", outcome
        assert "Accepted publickey for fleetfault" in (host.log.read_text() if host.log else "")
        runs = list((workspace / "state" / "fleet" / "runs").glob("*.json"))
        assert len(runs) == 1
        assert runs[0].stat().st_uid == user.pw_uid
        # nothing new on the host: not in the user's HOME, nor any temporary folder
        found = subprocess.run(
            ["find", str(home), "/tmp", "/var/tmp", "/dev/shm", "-xdev", "-user", USER,
             "-newer", str(marker), "-not", "-path", f"{workspace}*"],
            capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        assert found == [], found
    finally:
        farm.stop()
        shutil.rmtree(workspace, ignore_errors=True)
