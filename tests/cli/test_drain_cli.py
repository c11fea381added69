"""`fleet check --drain/--resume/--yes/--dry-run` and `--openmetrics`: what is refused before any
host is contacted, and a saved run's metrics from `fleet show` (the real Slurm cluster's tests
are tests/slurm/test_slurm_drain.py). Messages are read from stderr: on click 8.1 (Python 3.9's
CI job) a result's output is stdout alone."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.cli.inprocess import H200X2, invoke


def test_yes_or_dry_run_alone_and_both_together_are_refused(tmp_path: Path) -> None:
    alone = invoke(tmp_path, "check", "--run", str(H200X2), "--yes")
    assert alone.exit_code == 2
    assert "--yes and --dry-run go with --drain or --resume" in alone.stderr
    both = invoke(tmp_path, "check", "--run", str(H200X2), "--drain", "--yes", "--dry-run")
    assert both.exit_code == 2
    assert "give one of them" in both.stderr


def test_resume_needs_hosts_probed_now(tmp_path: Path) -> None:
    result = invoke(tmp_path, "check", "--run", str(H200X2), "--resume")
    assert result.exit_code == 2
    assert "a saved run cannot say a fault is gone" in result.stderr


def test_show_writes_a_saved_run_s_metrics_and_an_unwritable_file_sets_bit_64(
    tmp_path: Path,
) -> None:
    target = tmp_path / "fleet.prom"
    shown = invoke(tmp_path, "show", str(H200X2), "--openmetrics", str(target))
    assert shown.exit_code == 0, shown.output
    names = {family.name for family in text_string_to_metric_families(target.read_text())}
    assert {"fleet_run_exit_code", "fleet_allreduce_bus_bandwidth_bytes_per_second"} <= names
    missing = tmp_path / "no-such-folder" / "fleet.prom"
    failed = invoke(tmp_path, "show", str(H200X2), "--openmetrics", str(missing))
    assert failed.exit_code == 64
    assert f"cannot write the metrics to {missing}" in failed.stderr
