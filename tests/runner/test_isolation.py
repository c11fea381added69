"""A probe that segfaults, hangs, floods or prints garbage costs only itself."""

from __future__ import annotations

import time

from tests.runner.conftest import local_host, run_probes
from tests.runner.helpers import GOOD, SPAWNS_AND_HANGS, alive, pids_in, sleepers

SEGFAULT = """
import ctypes
def collect(options):
    ctypes.string_at(0)
"""
HANG = """
import time
TIMEOUT_S = 2
def collect(options):
    time.sleep(3600)
"""
GARBAGE = """
import os, sys
def collect(options):
    sys.stdout.buffer.write(b"\\xff\\xfe\\x00 not utf-8 \\x80\\n")
    sys.stdout.flush()
    return {"ok": True, "data": {"name": os.fsdecode(b"caf\\xe9")}}
"""
FLOOD = """
import os
def collect(options):
    block = b"x" * (1024 * 1024)
    for _ in range(100):
        os.write(1, block)
    return {"ok": True, "data": {"flooded_mib": 100}}
"""
RAISES = """
def collect(options):
    raise RuntimeError("the probe itself is broken")
"""
ABSENT = """
def collect(options):
    return {"ok": False, "data": {}, "error": "nvidia-smi not found"}
"""
HUGE_RESULT = """
def collect(options):
    return {"ok": True, "data": {"blob": "y" * (20 * 1024 * 1024)}}
"""


def test_each_bad_probe_costs_only_itself() -> None:
    outcome = run_probes(
        {
            "good": GOOD,
            "segfault": SEGFAULT,
            "hang": HANG,
            "garbage": GARBAGE,
            "flood": FLOOD,
            "raises": RAISES,
            "absent": ABSENT,
            "huge": HUGE_RESULT,
        }
    )["local"]
    probes = outcome.probes
    assert outcome.status == "partial"
    assert probes["good"].status == "ok"
    assert probes["good"].data == {"answer": 42}
    assert probes["segfault"].status == "failed"
    assert "SIGSEGV" in (probes["segfault"].error or "")
    assert probes["hang"].status == "timeout"
    assert probes["garbage"].status == "ok"
    assert probes["garbage"].data["name"].startswith("caf")
    assert probes["flood"].status == "ok"
    assert len(probes["flood"].output_tail) <= 2048
    assert probes["raises"].status == "failed"
    assert "the probe itself is broken" in (probes["raises"].error or "")
    assert probes["absent"].status == "absent"
    assert probes["absent"].error == "nvidia-smi not found"
    assert probes["huge"].status == "failed"
    assert "larger than" in (probes["huge"].error or "")
    assert set(outcome.failed_probes) == {"segfault", "hang", "raises", "huge"}


def test_absent_is_a_fact_and_the_host_stays_ok() -> None:
    outcome = run_probes({"good": GOOD, "absent": ABSENT})["local"]
    assert outcome.status == "ok"


def test_output_over_the_cap_is_truncated_and_bounded() -> None:
    big = 'def collect(options):\n    return {"ok": True, "data": {"x": "z" * 3000000}}\n'
    outcome = run_probes({"big": big, "good": GOOD}, output_limit=1024 * 1024)["local"]
    assert outcome.status == "output_truncated"


def test_host_deadline_kills_the_remote_runner() -> None:
    slow = "import time\nTIMEOUT_S = 600\ndef collect(options):\n    time.sleep(600)\n"
    started = time.monotonic()
    outcome = run_probes({"good": GOOD, "slow": slow}, timeout_s=3.0)["local"]
    assert outcome.status == "timeout"
    assert outcome.probes["good"].status == "ok"  # finished work is kept
    assert time.monotonic() - started < 10
    assert "slow" in (outcome.error or "")


def test_interrupt_marks_pending_hosts_and_keeps_finished_probes() -> None:
    slow = "import time\ndef collect(options):\n    time.sleep(600)\n"
    hosts = [local_host("a"), local_host("b")]
    started = time.monotonic()
    outcomes = run_probes({"good": GOOD, "slow": slow}, hosts=hosts, interrupt_after_s=2.0)
    assert time.monotonic() - started < 2.0 + 2.0
    assert sorted(outcomes) == ["a", "b"]
    for outcome in outcomes.values():
        assert outcome.status == "interrupted"
        assert outcome.probes["good"].status == "ok"


def test_missing_interpreter_is_no_python() -> None:
    host = local_host()
    host = type(host)(**{**host.__dict__, "python": "/nonexistent/python3"})
    outcome = run_probes({"good": GOOD}, hosts=[host])["local"]
    assert outcome.status == "no_python"


def test_probe_timeout_kills_the_probe_and_what_it_started() -> None:
    outcome = run_probes({"spawner": SPAWNS_AND_HANGS.format(probe_timeout=1)})["local"]
    assert outcome.probes["spawner"].status == "timeout"
    pids = pids_in(outcome.probes["spawner"].output_tail)
    time.sleep(0.3)
    assert [p for p in pids if alive(p)] == []


def test_host_deadline_leaves_no_process_behind() -> None:
    outcome = run_probes({"spawner": SPAWNS_AND_HANGS.format(probe_timeout=600)}, timeout_s=3.0)
    assert outcome["local"].status == "timeout"
    time.sleep(1.0)
    # the probe reported nothing before the deadline, so find what it started by command line
    assert sleepers() == []
