"""This machine, as its user sees it: the local transport finds `python: python3` as a shell
outside fleet's virtual environment would, or names fleet's own environment when it holds the only
one (issue 39, part 4); and a hung interpreter is said with the deadline that ended it.

The venvs are real (`python -m venv`); fleet runs in-process, in the venv the tests run in, with
that venv (or a fresh one) activated the way `. .venv/bin/activate` does: its bin first on PATH and
VIRTUAL_ENV set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.transport.local import user_python
from tests.cli.inprocess import invoke
from tests.conftest import ROOT

LOCAL = ROOT / "inventory" / "local.yaml"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real virtual environment (no pip: only its interpreter matters here)."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder


def tools(tmp_path: Path) -> Path:
    """A PATH folder with what the launch wrapper needs (sh, timeout) and no python."""
    folder = tmp_path / "tools"
    folder.mkdir()
    for name in ("sh", "timeout", "sleep"):
        found = shutil.which(name)
        assert found, name
        (folder / name).symlink_to(found)
    return folder


def test_an_activated_venv_is_passed_over(venv: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "python3").symlink_to(sys.executable)
    path = os.pathsep.join([str(venv / "bin"), str(outside), "/usr/bin", "/bin"])
    chosen = user_python("python3", {"PATH": path, "VIRTUAL_ENV": str(venv)})
    assert chosen.path == str(outside / "python3")
    assert chosen.note == (  # both named: fleet may live in the very venv meant to be probed
        f"python3 here is {outside / 'python3'}, as your shell finds it outside fleet's own "
        f"virtual environment ({venv}/bin/python3); set python: {venv}/bin/python3 to probe "
        "that one"
    )
    assert "VIRTUAL_ENV" not in chosen.environ
    assert str(venv / "bin") not in chosen.environ["PATH"].split(os.pathsep)


def test_the_venvs_own_python_alone_is_named(venv: Path, tmp_path: Path) -> None:
    path = os.pathsep.join([str(venv / "bin"), str(tools(tmp_path))])
    chosen = user_python("python3", {"PATH": path, "VIRTUAL_ENV": str(venv)})
    assert chosen.path == str(venv / "bin" / "python3")
    assert chosen.note is not None
    assert chosen.note.startswith(
        f"python3 is fleet's own virtual environment ({venv}/bin/python3)"
    )


def test_a_path_is_taken_as_written(venv: Path) -> None:
    chosen = user_python(str(venv / "bin" / "python3"), {"PATH": "/bin", "VIRTUAL_ENV": str(venv)})
    assert chosen.path == str(venv / "bin" / "python3")
    assert chosen.note is None


def probe_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, venv: str) -> dict:
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("VIRTUAL_ENV", venv)
    out = tmp_path / "run.json"
    result = invoke(tmp_path, "probe", "-i", str(LOCAL), "-p", "system", "--json", str(out))
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["hosts"]["local"]  # type: ignore[no-any-return]


def test_fleet_probe_from_inside_its_venv_probes_the_users_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The venv the tests run in, activated: `fleet probe` reports another interpreter."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment")
    if not shutil.which("python3", path=os.environ.get("PATH", "").replace(sys.prefix, "/-")):
        pytest.skip("no python3 outside the venv on PATH")
    path = os.pathsep.join([str(Path(sys.prefix) / "bin"), os.environ.get("PATH", "")])
    host = probe_system(tmp_path, monkeypatch, path, sys.prefix)
    system = host["probes"]["system"]["data"]["python"]
    assert not system["executable"].startswith(sys.prefix), system["executable"]
    assert "outside fleet's own virtual environment" in host["hint"]


def test_fleet_probe_names_its_own_venv_when_it_is_the_only_python(
    venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.pathsep.join([str(venv / "bin"), str(tools(tmp_path))])
    host = probe_system(tmp_path, monkeypatch, path, str(venv))
    assert host["probes"]["system"]["data"]["python"]["prefix"] == str(venv)
    assert host["hint"].startswith("python3 is fleet's own virtual environment")
    shown = invoke(tmp_path, "show", "latest")
    assert "fleet's own virtual environment" in shown.stdout


def test_a_hung_interpreter_is_said_with_the_host_side_deadline(tmp_path: Path) -> None:
    """--timeout 8: the script's alarm is 3 s (8 − 5 s of slack), and the host-side `timeout`
    ends the shim 2 s later (fleet.transport.launch.LAUNCH_GRACE_S): 5 s, not 8."""
    shim = tmp_path / "python3"
    shim.write_text("#!/bin/sh\nsleep 3617\n")
    shim.chmod(0o755)
    inventory = tmp_path / "hung.yaml"
    inventory.write_text(f"hosts:\n  here: {{transport: local, python: {shim}}}\n")
    out = tmp_path / "run.json"
    result = invoke(
        tmp_path, "probe", "-i", str(inventory), "-p", "system", "-t", "8", "--json", str(out)
    )
    host = json.loads(out.read_text())["hosts"]["here"]
    assert result.exit_code == 8, result.output
    assert host["status"] == "timeout"
    assert host["error"] == f"{shim} did not start the probes within 5 s"
