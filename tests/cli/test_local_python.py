"""This machine, as its user sees it (issue 45): with `python: python3`, the local transport probes
whichever of fleet's own interpreter and the machine's `python3` (found on PATH outside fleet's
virtual environment) has torch; fleet's own when both have it, the machine's when neither has;
the host's line says which and why. A path is taken as written; a hung interpreter is said with
the deadline that ended it.

The interpreters are real (`python -m venv`); a stand-in torch is a package folder in a venv's
site-packages (found by find_spec, never imported by the choice). fleet runs in-process; fleet's
own interpreter is stood in for by `local_python.own_interpreter`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.transport import local_python
from fleet.transport.local_python import UserPython, choose
from tests.cli.inprocess import invoke
from tests.conftest import ROOT

LOCAL = ROOT / "inventory" / "local.yaml"


def make_venv(folder: Path, torch: bool) -> Path:
    """A real virtual environment (no pip); with `torch`, a stand-in torch package in it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    if torch:
        (site,) = folder.glob("lib/python3*/site-packages")
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text("__version__ = '0.0.0+standin'\n")
    return folder


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two interpreters with a stand-in torch, two without."""
    root = tmp_path_factory.mktemp("venvs")
    return {
        name: make_venv(root / name, torch=name.endswith("torch"))
        for name in ("own-torch", "own-bare", "machine-torch", "machine-bare")
    }


def tools(tmp_path: Path) -> Path:
    """A PATH folder with what the launch wrapper needs (sh, timeout) and no python."""
    folder = tmp_path / "tools"
    folder.mkdir()
    for name in ("sh", "timeout", "sleep"):
        found = shutil.which(name)
        assert found, name
        (folder / name).symlink_to(found)
    return folder


def with_own(monkeypatch: pytest.MonkeyPatch, venv: Path) -> str:
    """`venv` stands in for fleet's own environment (as `python3 -m fleet` run from it)."""
    own = str(venv / "bin" / "python3")
    monkeypatch.setattr(local_python, "own_interpreter", lambda: own)
    return own


def chosen(own: Path, machine: Path, monkeypatch: pytest.MonkeyPatch) -> UserPython:
    with_own(monkeypatch, own)
    path = os.pathsep.join([str(own / "bin"), str(machine / "bin"), "/usr/bin", "/bin"])
    return asyncio.run(choose("python3", {"PATH": path, "VIRTUAL_ENV": str(own)}))


@pytest.mark.parametrize(
    ("own", "machine", "winner", "why"),
    [
        ("own-torch", "machine-bare", "own-torch", "fleet's own python3, which has torch"),
        ("own-bare", "machine-torch", "machine-torch", "python3 on PATH, the one with torch"),
        ("own-torch", "machine-torch", "own-torch", "fleet's own comes first"),  # tie
        ("own-bare", "machine-bare", "machine-bare", "neither it nor fleet's own"),  # tie
    ],
)
def test_the_interpreter_with_torch_is_probed(
    venvs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    own: str,
    machine: str,
    winner: str,
    why: str,
) -> None:
    choice = chosen(venvs[own], venvs[machine], monkeypatch)
    assert choice.path == str(venvs[winner] / "bin" / "python3")
    assert choice.note is not None
    assert choice.note.startswith(f"probed {choice.path}, ")
    assert why in choice.note
    if winner.startswith("machine"):  # the machine's runs as a shell outside fleet's venv
        assert "VIRTUAL_ENV" not in choice.environ
        assert str(venvs[own] / "bin") not in choice.environ["PATH"].split(os.pathsep)
    else:  # fleet's own runs in fleet's environment as it is
        assert choice.environ["VIRTUAL_ENV"] == str(venvs[own])


def test_the_venvs_own_python_alone_is_named(
    venvs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = with_own(monkeypatch, venvs["own-bare"])
    path = os.pathsep.join([str(venvs["own-bare"] / "bin"), str(tools(tmp_path))])
    choice = asyncio.run(choose("python3", {"PATH": path, "VIRTUAL_ENV": str(venvs["own-bare"])}))
    assert choice.path == own
    assert choice.note is not None
    assert choice.note.startswith(f"probed {own}, fleet's own python3: no other python3")


def test_a_path_is_taken_as_written(
    venvs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_own(monkeypatch, venvs["own-torch"])
    written = str(venvs["machine-bare"] / "bin" / "python3")
    choice = asyncio.run(choose(written, {"PATH": "/bin", "VIRTUAL_ENV": "/nowhere"}))
    assert choice.path == written
    assert choice.note is None


def probe_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, venv: str) -> dict:
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("VIRTUAL_ENV", venv)
    out = tmp_path / "run.json"
    result = invoke(tmp_path, "probe", "-i", str(LOCAL), "-p", "system", "--json", str(out))
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["hosts"]["local"]  # type: ignore[no-any-return]


def test_fleet_probe_from_its_own_bare_venv_probes_the_python3_with_torch(
    venvs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fleet in an environment of its own without torch, activated; the machine's python3 (on
    PATH after it) has torch: that one is probed, and the host's line says why."""
    with_own(monkeypatch, venvs["own-bare"])
    machine = venvs["machine-torch"] / "bin" / "python3"
    path = os.pathsep.join(
        [str(venvs["own-bare"] / "bin"), str(machine.parent), "/usr/bin", "/bin"]
    )
    host = probe_system(tmp_path, monkeypatch, path, str(venvs["own-bare"]))
    assert host["probes"]["system"]["data"]["python"]["prefix"] == str(venvs["machine-torch"])
    assert host["hint"] == (
        f"probed {machine}, python3 on PATH, the one with torch (fleet's own "
        f"{venvs['own-bare']}/bin/python3 has none)"
    )
    shown = invoke(tmp_path, "show", "latest")
    assert "python3 on PATH, the one with torch" in " ".join(shown.stdout.split())


def test_fleet_probe_from_the_torch_venv_probes_it(
    venvs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python3 -m fleet` from the environment that holds torch (first on PATH); the python3
    outside it has none: fleet's own is probed, not the one PATH finds outside."""
    with_own(monkeypatch, venvs["own-torch"])
    path = os.pathsep.join(
        [str(venvs["own-torch"] / "bin"), str(venvs["machine-bare"] / "bin"), "/usr/bin", "/bin"]
    )
    host = probe_system(tmp_path, monkeypatch, path, str(venvs["own-torch"]))
    assert host["probes"]["system"]["data"]["python"]["prefix"] == str(venvs["own-torch"])
    assert "fleet's own python3, which has torch" in host["hint"]


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


def test_fleets_own_interpreter_is_asked_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No second interpreter start for fleet's own: its sys.path is searched here, the current
    folder left out (a torch/ there is not what the bundle would import)."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    assert local_python.torch_on_path([str(site)])
    monkeypatch.chdir(site)
    assert not local_python.torch_on_path(["", str(site)])
    assert asyncio.run(local_python.has_torch(sys.executable, os.environ)) == (
        local_python.torch_on_path(sys.path)
    )
