"""bench/workers_loaded.py: the `--workers 1` reference at the default run's load (issue 49's
CPU-per-host figure), and one worker's own CPU per host read from a run's timeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.integration.fleet_runs import without_timings

sys.path.insert(0, str(ROOT / "bench"))
from workers_loaded import Together, least_median, run_together, worker_ms_per_host


def fanout(pid: int, cpu_s: float, hosts: int) -> dict[str, object]:
    return {"pid": pid, "role": "fanout", "cpu_s": cpu_s, "hosts": hosts, "loop_cpu_s": cpu_s}


def test_one_workers_cpu_per_host_is_the_median_workers() -> None:
    records = [{"pid": 1, "role": "relay", "hosts": 750}, fanout(2, 1.0, 250),
               fanout(3, 2.0, 250), fanout(4, 1.25, 250)]  # fmt: skip
    assert worker_ms_per_host(records) == 5.0  # 1.25 s over 250 hosts, the middle one


def test_a_single_process_run_has_no_worker_figure() -> None:
    assert worker_ms_per_host([fanout(1, 3.0, 1000)]) is None


def test_the_reference_takes_the_median_copy_and_the_least_round() -> None:
    def copies(*cpu_s: float) -> Together:
        return Together("loaded", cpu_s, (1.0,) * len(cpu_s), (), (0,) * len(cpu_s), ())

    rounds = [copies(4.0, 9.0, 5.0), copies(6.0, 4.5, 4.8)]
    assert least_median(rounds, 1000) == 4.8  # medians 5.0 and 4.8 ms/host


def test_copies_run_at_once_and_each_writes_the_same_run(tmp_path: Path) -> None:
    together = run_together(ROOT / "inventory" / "local.yaml", tmp_path, "loaded", 2, None)
    assert together.exit_codes == (0, 0)
    assert all(cpu > 0 for cpu in together.cpu_s)
    assert len(together.fanouts_s) == 2
    assert all(cpu > 0 for cpu in together.fanouts_s)
    first, second = (without_timings(json.loads(p.read_text())) for p in together.documents)
    assert first == second
    assert first["hosts"]
