"""Running `fleet` against the farm's sshd hosts as a user would: the inventory that reaches
them, `python -m fleet ARGS` with its own state folder, and reading what it printed. Plain
Python, no pytest: bench/ scripts use it as the tests do (tests/integration/conftest.py)."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleet.models import Host
from tests.integration.sshd import SshdFarm, free_port
from tests.paths import ROOT

# What differs between two runs of the same hosts by time alone.
TIMINGS = frozenset({"started", "finished", "elapsed_s"})


def without_timings(document: Any) -> Any:
    """A run document with its timings taken out: two runs of the same hosts compare equal."""
    if isinstance(document, dict):
        return {k: without_timings(v) for k, v in document.items() if k not in TIMINGS}
    if isinstance(document, list):
        return [without_timings(item) for item in document]
    return document


def closed_port() -> int:
    """A loopback port with nothing listening: connecting to it is refused."""
    return free_port("127.0.0.1")


@dataclass
class FleetResult:
    returncode: int
    stdout: str
    stderr: str
    run: dict[str, Any] | None
    state_dir: Path

    @property
    def document(self) -> dict[str, Any]:
        assert self.run is not None, f"no run document; stderr: {self.stderr}"
        return self.run

    def host(self, name: str) -> dict[str, Any]:
        return dict(self.document["hosts"][name])

    def status(self, name: str) -> str:
        return str(self.host(name)["status"])

    def full_diff(self) -> str:
        """`fleet diff` of this run: every differing fact (`fleet probe` gives the findings and
        the divergence in brief)."""
        run_file = self.state_dir.parent / "diffed_run.json"
        run_file.write_text(json.dumps(self.document))
        done = subprocess.run(
            [sys.executable, "-m", "fleet", "diff", str(run_file)],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "300", "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
            cwd=ROOT,
        )
        return done.stdout


def write_inventory(
    path: Path,
    farm: SshdFarm,
    hosts: Mapping[str, Mapping[str, Any]],
    known_hosts: Path,
    **defaults: Any,
) -> Path:
    document = {
        "defaults": {
            "user": getpass.getuser(),
            "identity_file": str(farm.client_key),
            "known_hosts": str(known_hosts),
            "python": sys.executable,
            "connect_timeout": 5,
            **defaults,
        },
        "hosts": {name: dict(settings) for name, settings in hosts.items()},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def ssh_host(farm: SshdFarm, name: str, **extra: Any) -> dict[str, Any]:
    host = farm.hosts[name]
    return {"address": host.address, "port": host.port, **extra}


def ssh_target(farm: SshdFarm, name: str, tmp_path: Path) -> Host:
    """The farm's host `name` as fleet's Host, as this user with the farm's key and known_hosts."""
    host = farm.hosts[name]
    known = farm.known_hosts(tmp_path / "known_hosts", [name])
    return Host(
        name=name,
        address=host.address,
        port=host.port,
        user=getpass.getuser(),
        identity_file=str(farm.client_key),
        known_hosts=str(known),
        python=sys.executable,
        connect_timeout=5,
    )


def fleet_invocation(
    tmp_path: Path, args: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `python -m fleet ARGS`, with its own state folder;
    `probe` also writes its run document to tmp_path/run.json."""
    full_env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "COLUMNS": "300",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    command = [sys.executable, "-m", "fleet", *args]
    if args and args[0] == "probe":
        command += ["--json", str(tmp_path / "run.json")]
    return command, full_env


def fleet_result(tmp_path: Path, returncode: int, stdout: str, stderr: str) -> FleetResult:
    json_out = tmp_path / "run.json"
    run = json.loads(json_out.read_text()) if json_out.exists() else None
    return FleetResult(returncode, stdout, stderr, run, tmp_path / "state")


def run_fleet(
    tmp_path: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 180
) -> FleetResult:
    """`python -m fleet ARGS` as a user would run it, with its own state folder."""
    command, full_env = fleet_invocation(tmp_path, args, env)
    done = subprocess.run(
        command, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=ROOT
    )
    return fleet_result(tmp_path, done.returncode, done.stdout, done.stderr)


def divergence_block(stdout: str, fact: str) -> str:
    """The diff's lines for `fact`: its line and the lines under it indented deeper."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        text = line.lstrip()
        if text == fact or text.startswith(f"{fact}  "):
            indent = len(line) - len(text)
            block = [line]
            block += [x for x in _takewhile_indented(lines[index + 1 :], indent + 1)]
            return "\n".join(block)
    raise AssertionError(f"no divergence block for {fact}:\n{stdout}")


def finding_lines(stdout: str, hosts: str) -> str:
    """The error finding on exactly `hosts` (`✗ HOSTS: what`, folded names as printed), with the
    lines under it (`    → action: fix`)."""
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"✗ {hosts}: "):
            return "\n".join([line, *_takewhile_indented(lines[index + 1 :], 4)])
    raise AssertionError(f"no error finding on {hosts!r}:\n{stdout}")


def _takewhile_indented(lines: list[str], indent: int = 6) -> list[str]:
    taken = []
    for line in lines:
        if not line.startswith(" " * indent):
            break
        taken.append(line)
    return taken
