"""`fleet check` never looks green when it judged nothing (issue 12, items 1 and 2), in-process."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fleet import api
from tests.cli.inprocess import GPULESS, LOOPBACK8, invoke, run_document, write_run

BIT_CHECK_FAILED = 32

# How many rules the inference pack has: the messages count them.
PACK_RULES = len(api.load_checks(["inference"])[0])


def test_gpu_less_host_is_incomplete_not_passed_and_says_why(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(GPULESS))
    assert done.exit_code == 0, done.output  # not judged is reported; only --strict gates on it
    assert "check passed" not in done.output
    assert "? check incomplete" in done.output
    assert "probe gpu absent: nvidia-smi not found" in done.output
    summary = done.output.split("check incomplete", 1)[1]
    assert "not judged:" in summary
    assert "rules on local: probe gpu absent" in summary


def test_strict_fails_when_error_rules_were_not_judged(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(GPULESS), "--strict")
    assert done.exit_code == BIT_CHECK_FAILED, done.output


def test_json_document_says_incomplete(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(GPULESS), "--format", "json")
    document = json.loads(done.stdout)
    assert document["passed"] is False
    assert document["outcome"] == "incomplete"
    reasons = {c["reason"] for c in document["not_judged"]}
    assert "probe gpu absent: nvidia-smi not found" in reasons


def unreachable_fleet(tmp_path: Path, count: int) -> Path:
    """The recorded 8-host run, with `count` hosts that could not be connected to."""
    document = run_document(LOOPBACK8)
    for index, name in enumerate(list(document["hosts"])[:count]):
        host = document["hosts"][name]
        host.update(
            status="unreachable",
            address=f"10.0.0.{index}",
            error=f"cannot connect to {name} (10.0.0.{index}:22): connection refused",
            probes={},
        )
    return write_run(tmp_path / "run.json", copy.deepcopy(document))


def test_unreachable_reason_is_said_once_not_under_every_rule(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(unreachable_fleet(tmp_path, 3)))
    assert done.output.count("connection refused") == 1, done.output
    assert f"all {PACK_RULES} rules on gpu-[01-03]: host unreachable" in done.output
    assert "check passed" not in done.output


def test_no_host_reached_prints_no_rule_list(tmp_path: Path) -> None:
    done = invoke(tmp_path, "check", "--run", str(unreachable_fleet(tmp_path, 8)))
    assert f"no host was reached: none of {PACK_RULES} rule(s) judged" in done.output
    assert done.output.count("connection refused") == 1
    assert "? check incomplete" in done.output
    assert len(done.output.splitlines()) < 12, done.output


def test_html_page_says_incomplete_like_the_terminal_and_json(tmp_path: Path) -> None:
    """One truth: the page attached to a ticket never says green when nothing was judged."""
    out = tmp_path / "check.html"
    done = invoke(tmp_path, "check", "--run", str(GPULESS), "--html", str(out))
    assert done.exit_code == 0, done.output
    page = out.read_text()
    assert "check passed" not in page
    assert '<p class="verdict odd"><b>check incomplete</b>: no error failures' in page
    terminal_detail = done.output.split("? check incomplete: ", 1)[1].splitlines()[0]
    assert terminal_detail.split(";")[0] in page  # the same words on both surfaces
