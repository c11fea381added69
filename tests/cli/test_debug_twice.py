"""--debug given once in a process that runs fleet again (the Python API, the tests): a later
call logs to its own stderr, even when the stderr of the first call has been closed since (click's
test runner closes its own; the error path logs every FleetError at debug level)."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from fleet.cli.root import StderrNow
from tests.helpers import invoke_fleet


def test_a_closed_earlier_stderr_is_never_written_or_flushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    earlier = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # as click's runner makes it
    handler = StderrNow(earlier)
    earlier.close()  # the first call's stderr, gone
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    handler.emit(logging.LogRecord("fleet", logging.DEBUG, __file__, 1, "hello", None, None))
    assert now.getvalue() == "hello\n"


def test_debug_holds_only_for_the_call_that_asked(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.json")
    asked = invoke_fleet(tmp_path, "diff", missing, "--debug")
    assert "Traceback" in asked.stderr  # the cause chain, as asked
    group = invoke_fleet(tmp_path, "--debug", "diff", missing)
    assert "Traceback" in group.stderr  # before the command too
    later = invoke_fleet(tmp_path, "diff", missing)
    assert later.returncode == 2
    assert "Traceback" not in later.stderr, later.stderr
