"""A probe that raises: its error names FILE:LINE in the probe, and the result keeps the
traceback's tail (the last frames, file:line and source line each; no runner frames), masked and
bounded (issue 24, item 7)."""

from __future__ import annotations

from fleet.models import ProbeResult
from tests.runner.conftest import run_probes

RAISES = """
def helper(value):
    raise RuntimeError("boom " + value)


def collect(options):
    return helper("hf_abcdefghijklmnopqrstuvwxyz0123")
"""
RECURSES = """
def deeper(n):
    return deeper(n + 1)


def collect(options):
    return deeper(0)
"""
CHAINED = """
import json


def collect(options):
    try:
        json.loads("{")
    except ValueError as exc:
        raise KeyError("no config") from exc
"""


def test_the_error_names_the_probe_line_and_the_tail_its_frames() -> None:
    result = run_probes({"raiser": RAISES})["local"].probes["raiser"]
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("probe raised RuntimeError: boom ***")
    assert "probes/raiser.py:3" in result.error  # the innermost line in the probe's own file
    tail = result.traceback
    assert 'File "probes/raiser.py", line 7, in collect' in tail
    assert 'File "probes/raiser.py", line 3, in helper' in tail
    assert 'raise RuntimeError("boom " + value)' in tail  # the source line, though no file is
    assert tail.rstrip().endswith("RuntimeError: boom ***")
    assert "hf_abcdef" not in tail  # masked, like every result
    assert "child_main" not in tail  # the runner's own frames are left out
    assert "run_probe_source" not in tail


def test_a_deep_traceback_is_bounded_to_its_last_frames() -> None:
    result = run_probes({"recurses": RECURSES})["local"].probes["recurses"]
    assert "RecursionError" in (result.error or "")
    assert "probes/recurses.py:3" in (result.error or "")
    assert 0 < len(result.traceback) <= 4096
    assert result.traceback.rstrip().endswith("maximum recursion depth exceeded")


def test_a_chained_exception_keeps_the_last_one_and_where_it_was_raised() -> None:
    result = run_probes({"chained": CHAINED})["local"].probes["chained"]
    assert (result.error or "").startswith("probe raised KeyError: 'no config'")
    assert "probes/chained.py:9" in (result.error or "")
    assert "JSONDecodeError" in result.traceback  # the cause is in the tail too


def test_the_tail_travels_in_the_run_document() -> None:
    result = ProbeResult("failed", False, {}, "probe raised X", 0.1, "", traceback="T")
    assert result.to_dict()["traceback"] == "T"
    assert ProbeResult.from_dict(result.to_dict()) == result
    assert "traceback" not in ProbeResult("ok", True, {}, None, 0.1).to_dict()
