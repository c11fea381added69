"""The Python API as the README shows it: the example runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import fleet
from tests.conftest import ROOT


def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From Python") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README's 'From Python' section has no python block"
    return match.group(1)


def test_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    exec(compile(readme_python_example(), "README.md", "exec"), namespace)
    run = namespace["run"]
    assert isinstance(run, fleet.Run)
    assert run.hosts["local"].status == "ok"
    saved = Path(str(namespace["path"]))
    assert saved.is_relative_to(tmp_path / "state")
    assert oct(os.stat(saved).st_mode & 0o777) == "0o600"


def test_bad_input_raises_a_fleet_error_before_contacting_anyone(tmp_path: Path) -> None:
    with pytest.raises(fleet.FleetError, match="unknown probe 'nope'"):
        fleet.probe(inventory=str(ROOT / "inventory" / "local.yaml"), probes=["nope"])
    with pytest.raises(fleet.FleetError, match="does not exist"):
        fleet.probe(inventory=str(tmp_path / "missing.yaml"))


def test_a_failing_host_does_not_raise(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts:\n  gone: {transport: local, python: /nonexistent/python3}\n")
    run = fleet.probe(inventory=str(inventory), probes=["system"])
    assert run.hosts["gone"].status == "no_python"
