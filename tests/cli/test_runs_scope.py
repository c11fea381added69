"""Drift that is drift (issue 12, item 5): like with like, inventory-scoped latest/previous, and
`fleet runs --prune`. In-process, over recorded real runs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.cli.inprocess import (
    GPULESS,
    LOOPBACK8,
    invoke,
    run_document,
    save_document,
    saved_runs_dir,
)

EXIT_DRIFT = 16


runs_dir = saved_runs_dir
save = save_document


def test_runs_of_two_inventories_are_not_drift(tmp_path: Path) -> None:
    """`fleet probe` (local) then another inventory: 'previous latest' used to exit 16 with
    '0 change(s)'. Now: a warning that says what differs, and no drift."""
    save(tmp_path, run_document(GPULESS), "2026-11-30T01:00:00.000Z")
    save(tmp_path, run_document(LOOPBACK8), "2026-11-30T02:00:00.000Z")
    done = invoke(tmp_path, "diff", "previous", "latest")
    assert done.exit_code == 0, done.output
    assert "warning: the runs are of different inventories" in done.output
    assert "only in the new run: gpu-[01-08]" in done.output


def test_a_probe_subset_is_not_drift(tmp_path: Path) -> None:
    """`--baseline` after `-p`: the probes one run did not run are named, never changes."""
    full = run_document(LOOPBACK8)
    subset = json.loads(json.dumps(full))
    subset["probes"] = ["system", "packages"]
    for host in subset["hosts"].values():
        host["probes"] = {p: host["probes"][p] for p in ("system", "packages")}
    save(tmp_path, full, "2026-11-30T01:00:00.000Z")
    save(tmp_path, subset, "2026-11-30T02:00:00.000Z")
    done = invoke(tmp_path, "diff", "previous", "latest")
    assert done.exit_code == 0, done.output
    assert "not compared, not run in the new run: dir, gpu, imports, nccl, torch" in done.output
    assert "_status" not in done.output


def test_latest_can_be_scoped_to_an_inventory(tmp_path: Path) -> None:
    loopback = run_document(LOOPBACK8)
    upgraded = json.loads(json.dumps(loopback))
    upgraded["hosts"]["gpu-05"]["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    save(tmp_path, loopback, "2026-11-30T01:00:00.000Z", inventory="inv/lab.yaml")
    save(tmp_path, upgraded, "2026-11-30T02:00:00.000Z", inventory="inv/lab.yaml")
    save(tmp_path, run_document(GPULESS), "2026-11-30T03:00:00.000Z")  # the newest: local
    for args in (["previous:lab", "latest:lab"], ["previous", "latest", "-i", "inv/lab.yaml"]):
        done = invoke(tmp_path, "diff", *args)
        assert done.exit_code == EXIT_DRIFT, (args, done.output)
        assert "torch.version  2.11.0+cu130 → 2.12.0+cu130  gpu-05" in done.output
    shown = invoke(tmp_path, "show", "latest:local", "--json", "-")
    assert json.loads(shown.stdout)["hosts"] == ["local"]
    missing = invoke(tmp_path, "diff", "latest:nowhere")
    assert missing.exit_code == 2
    assert "no latest run of inventory nowhere" in missing.stderr


def make_runs(tmp_path: Path, count: int, year: int = 2020) -> list[str]:
    document = run_document(GPULESS)
    days = range(1, count + 1)
    return [save(tmp_path, document, f"{year}-01-{day:02d}T01:00:00.000Z").name for day in days]


def test_prune_keeps_the_newest_and_names_what_it_deletes(tmp_path: Path) -> None:
    names = make_runs(tmp_path, 5)
    dry = invoke(tmp_path, "runs", "--prune", "--keep", "2", "--dry-run")
    assert dry.exit_code == 0
    assert "would delete 3 run(s)" in dry.output
    assert len(os.listdir(runs_dir(tmp_path))) == 5
    done = invoke(tmp_path, "runs", "--prune", "--keep", "2")
    assert done.exit_code == 0
    assert "deleted 3 run(s)" in done.output
    assert "2 kept" in done.output
    assert all(name in done.output for name in names[:3])
    assert sorted(os.listdir(runs_dir(tmp_path))) == names[3:]


def test_prune_by_age_and_bad_input(tmp_path: Path) -> None:
    old = make_runs(tmp_path, 3, year=2020)
    recent = make_runs(tmp_path, 1, year=time.gmtime().tm_year + 1)  # not yet old
    done = invoke(tmp_path, "runs", "--prune", "--older-than", "30d")
    assert "deleted 3 run(s)" in done.output
    assert all(name in done.output for name in old)
    assert sorted(os.listdir(runs_dir(tmp_path))) == recent
    bad = invoke(tmp_path, "runs", "--prune", "--older-than", "soon")
    assert bad.exit_code == 2
    assert "'soon' is not a duration" in bad.stderr
    alone = invoke(tmp_path, "runs", "--prune")
    assert alone.exit_code == 2
    assert "--keep" in alone.stderr


def test_baseline_latest_is_the_latest_run_of_the_inventory_probed(tmp_path: Path) -> None:
    """`fleet probe -i X --baseline latest` never compares with another inventory's run."""
    save(tmp_path, run_document(LOOPBACK8), "2026-11-30T01:00:00.000Z", inventory="inv/lab.yaml")
    inventory = tmp_path / "mine.yaml"
    inventory.write_text("hosts:\n  here: {transport: local}\n")
    done = invoke(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--baseline", "latest")
    assert done.exit_code == 2, done.output
    assert f"no latest run of inventory {inventory}" in done.stderr


def test_a_name_two_inventories_share_is_refused_naming_both(tmp_path: Path) -> None:
    loopback = run_document(LOOPBACK8)
    save(tmp_path, loopback, "2026-11-30T01:00:00.000Z", inventory="site-a/inventory.yaml")
    save(tmp_path, loopback, "2026-11-30T02:00:00.000Z", inventory="site-b/inventory.yaml")
    for ref in ("latest:inventory.yaml", "latest:inventory"):
        done = invoke(tmp_path, "show", ref)
        assert done.exit_code == 2, done.output
        assert "names 2 different inventories" in done.stderr
        assert "site-a/inventory.yaml, site-b/inventory.yaml" in done.stderr
    # the path itself is no longer ambiguous
    shown = invoke(tmp_path, "show", "latest:site-a/inventory.yaml", "--json", "-")
    assert shown.exit_code == 0, shown.output
