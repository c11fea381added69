"""One word, one meaning (issue 47): `timeout_s` is a probe's deadline to the runner; the gpu and
health probes' per-command nvidia-smi timeout is `command_timeout_s`. An inventory written
before, whose probe_args say `timeout_s` for it, still sets the command timeout."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from fleet.execution.bundle import available_probes
from tests.conftest import ROOT


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The probe's file as a module, its shipped helpers importable beside it."""
    path = ROOT / available_probes()[name].path
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"probe_{name}_under_test", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gpu", "health"])
def test_the_command_timeout_has_its_own_name_and_reads_the_old_one(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = load(name, monkeypatch)
    command_timeout = probe.command_timeout
    default = probe.COMMAND_TIMEOUT_S
    assert command_timeout({}) == default
    assert command_timeout({"command_timeout_s": 3}) == 3.0
    assert command_timeout({"timeout_s": 40}) == 40.0  # a probe_args written before
    assert command_timeout({"timeout_s": 40, "command_timeout_s": 3}) == 3.0
