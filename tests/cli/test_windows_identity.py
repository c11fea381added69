"""A Windows-style IdentityFile is kept as `ssh -G` keeps it (issue 46, item 8): OpenSSH 9.2
prints `C:\\Users\\x\\key.pem` and `~\\.ssh\\id_rsa` as written (backslashes kept; ssh opens the
first relative to its working folder and stops at the second: no such user). fleet keeps both in
the host's identity files, refuses the second host as before, and `fleet hosts` shows the first
rather than an empty cell. Judged by the real `ssh -G`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import invoke_fleet

CONFIG = ROOT / "tests" / "corpus" / "ssh_config" / "fleet-windows-paths" / "config"
VERBATIM = ("win1", "win2", "win3", "win4", "win6", "win7")  # no %-token or ~/ to expand


def ssh_g_identities(alias: str) -> list[str]:
    done = subprocess.run(
        ["ssh", "-G", "-F", str(CONFIG), alias], capture_output=True, text=True, check=True
    )
    return [
        line.split(" ", 1)[1]
        for line in done.stdout.splitlines()
        if line.startswith("identityfile ")
    ]


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh client (ssh -G)")
def test_identity_files_are_what_ssh_g_prints(tmp_path: Path) -> None:
    done = invoke_fleet(
        tmp_path, "hosts", "-H", ",".join(VERBATIM), "--ssh-config", str(CONFIG), "--json", "-"
    )
    hosts = json.loads(done.stdout)["hosts"]
    for alias in VERBATIM:
        assert hosts[alias]["identity_files"] == ssh_g_identities(alias), alias
    assert hosts["win6"]["refused"]  # ssh stops at `~\.ssh\id_rsa`: fleet does not connect


def test_the_hosts_table_names_the_key_it_keeps(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "hosts", "-H", "win1", "--ssh-config", str(CONFIG))
    assert "C:\\Users\\x\\key.pem (missing)" in done.stdout
