"""One word, one meaning (issue 47): `timeout_s` is a probe's deadline to the runner; the gpu and
health probes' per-command nvidia-smi timeout is `command_timeout_s`. An inventory written
before, whose probe_args say `timeout_s` for it, still sets the command timeout."""

from __future__ import annotations

import pytest

from tests.probes.handrun import load_probe


@pytest.mark.parametrize("name", ["gpu", "health"])
def test_the_command_timeout_has_its_own_name_and_reads_the_old_one(name: str) -> None:
    probe = load_probe(name)
    default = probe.COMMAND_TIMEOUT_S
    assert probe.command_timeout({}) == default
    assert probe.command_timeout({"command_timeout_s": 3}) == 3.0
    assert probe.command_timeout({"timeout_s": 40}) == 40.0  # a probe_args written before
    assert probe.command_timeout({"timeout_s": 40, "command_timeout_s": 3}) == 3.0
