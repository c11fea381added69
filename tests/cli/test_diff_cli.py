"""`fleet diff`, `fleet runs`, `fleet show` over recorded run documents."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.models import Run
from fleet.store import save_run
from tests.conftest import ROOT
from tests.helpers import invoke_fleet as fleet

RECORDED = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"


def upgraded_copy(tmp_path: Path) -> Path:
    document = json.loads(RECORDED.read_text())
    document["hosts"]["gpu-05"]["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    document["started"] = "2026-11-30T02:00:00.000Z"
    path = tmp_path / "new.json"
    path.write_text(json.dumps(document))
    return path


def test_diff_of_two_files_exits_16_and_prints_markdown(tmp_path: Path) -> None:
    done = fleet(
        tmp_path, "diff", str(RECORDED), str(upgraded_copy(tmp_path)), "--format", "markdown"
    )
    assert done.returncode == 16, done.stderr
    assert "| `torch.version` | 2.11.0+cu130 → 2.12.0+cu130 | gpu-05 |" in done.stdout


def test_diff_of_a_run_with_itself_exits_0(tmp_path: Path) -> None:
    done = fleet(tmp_path, "diff", str(RECORDED), str(RECORDED))
    assert done.returncode == 0
    assert "none" in done.stdout


def test_diff_of_one_run_is_the_cross_host_diff(tmp_path: Path) -> None:
    done = fleet(tmp_path, "diff", str(RECORDED), "--json", "-")
    assert done.returncode == 0
    assert json.loads(done.stdout)["odd_hosts"] == ["gpu-07", "gpu-08"]


def test_runs_lists_and_show_renders_saved_runs(tmp_path: Path) -> None:
    runs_dir = tmp_path / "state" / "fleet" / "runs"
    save_run(Run.from_dict(json.loads(RECORDED.read_text())), runs_dir)
    listed = fleet(tmp_path, "runs")
    assert listed.returncode == 0
    assert "8 ok" in listed.stdout
    shown = fleet(tmp_path, "show", "latest")
    assert shown.returncode == 0
    assert "odd: gpu-[07-08]" in shown.stdout


def test_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    done = fleet(tmp_path, "diff", "previous", "latest")
    assert done.returncode == 2
    assert "there is no previous run" in done.stderr
