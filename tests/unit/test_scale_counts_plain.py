"""Issue 40: every command works per distinct answer on a plain `--json` document too, as on a
saved run, because loading shares its equal payloads: tests/unit/test_scale_counts.py's counts
(48 and 96 hosts with the same distinct answers cost about the same), run on runs read from the
plain form. Counted, not timed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fleet.models import Run
from fleet.store import read_run_file, write_run_json
from tests.unit import test_scale_counts
from tests.unit.helpers import calls, fleet_run
from tests.unit.test_scale_counts import HOSTS


def plain_run(count: int, folder: Path, seed: int = 1) -> Run:
    """fleet_run's hosts written as `fleet probe --json FILE` writes them, and read back."""
    path = folder / "plain.json"
    write_run_json(path, fleet_run(count, folder, seed))
    return read_run_file(path)


@pytest.mark.parametrize(
    "counted_test",
    [
        test_scale_counts.test_the_diff_flattens_each_distinct_answer_once,
        test_scale_counts.test_drift_flattens_each_distinct_answer_once,
        test_scale_counts.test_show_describes_each_distinct_answer_once,
        test_scale_counts.test_check_judges_each_distinct_answer_once,
        test_scale_counts.test_the_report_renders_each_distinct_answer_once,
    ],
    ids=["diff", "drift", "show", "check", "report"],
)
def test_a_plain_document_is_worked_on_per_distinct_answer(
    counted_test: Callable[[Path], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(test_scale_counts, "fleet_run", plain_run)
    counted_test(tmp_path)


def test_loading_a_plain_document_is_linear_in_hosts(tmp_path: Path) -> None:
    made = []
    for count in (HOSTS, 2 * HOSTS):
        path = tmp_path / f"{count}.json"
        write_run_json(path, fleet_run(count, tmp_path / str(count)))
        with calls() as counts:
            read_run_file(path)
        made.append(counts)
    small, large = made
    for name in ("_result_member", "_object"):  # a probe result's member, an object
        assert 0 < large[name] <= 2.2 * small[name], (name, small[name], large[name])
