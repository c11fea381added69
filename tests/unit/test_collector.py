"""The collector paused over work that makes many objects and no garbage (fleet/collector.py): in
the fleet executable, what a pause made is frozen when it ends, so that no collection walks it
after (drift's baseline run, the judging's verdicts); fleet called in-process freezes nothing."""

from __future__ import annotations

import gc

import pytest

from fleet import collector


@pytest.fixture
def collecting() -> None:
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")


@pytest.mark.usefixtures("collecting")
def test_in_the_executable_what_a_pause_made_is_frozen_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(collector._START_UP, "executable", True)
    before = gc.get_freeze_count()
    with collector.paused():
        assert not gc.isenabled()
        made = [[index] for index in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)


@pytest.mark.usefixtures("collecting")
def test_in_process_a_pause_freezes_nothing() -> None:
    before = gc.get_freeze_count()
    with collector.paused():
        with collector.paused():  # nested: the collector stays off until the outer one ends
            made = [[index] for index in range(1000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
    assert len(made) == 1000
