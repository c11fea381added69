"""Probes that declare PRELOAD share one import in a fork server; a bad preload costs no results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.runner.conftest import run_probes
from tests.runner.helpers import sleepers

REPORTS_PIDS = """
import os
PRELOAD = ("fleet_test_heavy",)
TIMEOUT_S = {timeout}
def collect(options):
    import fleet_test_heavy
    return {{"ok": True, "data": {{"imported_in": fleet_test_heavy.IMPORTED_IN, "me": os.getpid()}}}}
"""
PLAIN = """
import os
def collect(options):
    return {"ok": True, "data": {"me": os.getpid()}}
"""


@pytest.fixture
def heavy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write `fleet_test_heavy` with the given body; the runner's interpreter finds it."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    def write(body: str) -> None:
        (tmp_path / "fleet_test_heavy.py").write_text(body)

    return write


def test_preloaded_probes_share_one_import(heavy_module) -> None:
    heavy_module("import os\nIMPORTED_IN = os.getpid()\n")
    probes = {
        "a": REPORTS_PIDS.format(timeout=60),
        "b": REPORTS_PIDS.format(timeout=60),
        "plain": PLAIN,
    }
    outcome = run_probes(probes)["local"]
    assert outcome.status == "ok", {
        n: (r.status, r.error, r.output_tail) for n, r in outcome.probes.items()
    }
    a, b = outcome.probes["a"].data, outcome.probes["b"].data
    assert a["imported_in"] == b["imported_in"]  # one import, in the preloader
    assert a["imported_in"] not in (a["me"], b["me"])  # not in the probes themselves
    assert a["me"] != b["me"]  # each probe still its own process


def test_a_crash_while_preloading_costs_no_results(heavy_module) -> None:
    heavy_module("import ctypes\nctypes.string_at(0)\n")
    probes = {
        "a": REPORTS_PIDS.format(timeout=60),
        "b": REPORTS_PIDS.format(timeout=60),
        "plain": PLAIN,
    }
    outcome = run_probes(probes)["local"]
    assert outcome.probes["plain"].status == "ok"
    for name in ("a", "b"):  # started again the ordinary way: each meets the crash itself
        assert outcome.probes[name].status == "failed", outcome.probes[name]
        assert "SIGSEGV" in (outcome.probes[name].error or "")


def test_a_hang_while_preloading_times_out_and_leaves_nothing(heavy_module) -> None:
    heavy_module("import subprocess, time\nsubprocess.Popen(['sleep', '600'])\ntime.sleep(600)\n")
    probes = {
        "a": REPORTS_PIDS.format(timeout=2),
        "b": REPORTS_PIDS.format(timeout=2),
        "plain": PLAIN,
    }
    outcome = run_probes(probes, timeout_s=30)["local"]
    assert outcome.probes["plain"].status == "ok"
    assert {outcome.probes[n].status for n in ("a", "b")} == {"timeout"}
    time.sleep(0.5)
    assert sleepers() == []
