"""The allreduce matrix read back: the pack's rule on the deployment's NCCL_ALGO / NCCL_PROTO, the
terminal's per-cohort view, and winners and failures in the cross-host diff and in drift. Hosts are
the real 2×H200 run with a matrix added from recorded rows (winners from the probe's own logic)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.api import ProbeOptions
from fleet.api.probing import build_probe_bundle, probe_args_from
from fleet.checks import evaluate
from fleet.store import read_run_file
from fleet.units.allreduce.matrix import cohort_matrices, configured_variant
from fleet.units.allreduce.terminal import allreduce_matrix_table
from tests.conftest import ROOT
from tests.helpers import invoke_fleet
from tests.probes.handrun import load_helper
from tests.recorded import data, make_run, real_host
from tests.unit.helpers import pack_rules, verdict

matrix_variants = load_helper("_allreduce_variants")  # the probe's own winners logic
MiB = 1 << 20
Host = dict[str, Any]


def rows(*latencies: tuple[str, int, float], correct: bool = True) -> list[dict[str, Any]]:
    return [{"mode": m, "bytes": b, "latency_us": us, "correct": correct} for m, b, us in latencies]


def variant(status: str, env: dict[str, str], found: list[dict[str, Any]], failed_at=()) -> Any:
    return {"status": status, "env": env, "rows": found, "failed_at": list(failed_at)}


def with_matrix(host: Host, tree_graph_fails: bool = True, ring_ll_8b: float = 25.0) -> Host:
    """NCCL default, Ring/LL, Ring/Simple and Tree/LL; Tree fails under CUDA graphs."""
    tree_status = "partial" if tree_graph_fails else "ok"
    tree_rows = rows(("eager", 8, 24.0), ("eager", 256 * MiB, 1500.0))
    if not tree_graph_fails:
        tree_rows += rows(("graph", 8, 9.0))
    variants = {
        "nccl:default": variant(
            "ok", {}, rows(("eager", 8, 27.0), ("graph", 8, 9.1), ("eager", 256 * MiB, 893.0))
        ),
        "nccl:Ring/LL": variant(
            "ok",
            {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
            rows(("eager", 8, ring_ll_8b), ("graph", 8, 9.2), ("eager", 256 * MiB, 2900.0)),
        ),
        "nccl:Ring/Simple": variant(
            "ok",
            {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
            rows(("eager", 8, 30.0), ("graph", 8, 12.0), ("eager", 256 * MiB, 900.0)),
        ),
        "nccl:Tree/LL": variant(
            tree_status,
            {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
            tree_rows,
            ["graph 8 B"] if tree_graph_fails else [],
        ),
        "nccl:CollnetDirect/LL": variant(
            "failed", {"NCCL_ALGO": "CollnetDirect", "NCCL_PROTO": "LL"}, [], ["failed"]
        ),
    }
    winners = matrix_variants.matrix_winners(variants)
    data(host, "allreduce")["matrix"] = {
        "sizes": [8, 256 * MiB],
        "winners": winners,
        "stopped_early": False,
        "elapsed_s": 41.2,
        "variants": variants,
    }
    return host


def configured(host: Host, **env: str) -> Host:
    data(host, "nccl")["env"].update(env)
    return host


# ----------------------------------------------------------------------- the deployment's variant


def test_a_configured_algorithm_that_fails_under_graphs_warns() -> None:
    run = make_run(tree=configured(with_matrix(real_host()), NCCL_ALGO="Tree"))
    found = verdict(evaluate(pack_rules(), run), "allreduce-configured-variant", "tree")
    assert found.status == "fail"
    assert "broken: nccl:Tree/LL (graph 8 B)" in found.observed
    assert "this host sets NCCL_ALGO=Tree" in found.fix
    assert "nccl:Tree/LL" in found.fix


def test_a_configured_protocol_much_slower_than_the_winner_warns() -> None:
    host = configured(with_matrix(real_host()), NCCL_ALGO="ring", NCCL_PROTO="LL")  # any case
    summary = configured_variant(data(host, "allreduce")["matrix"], data(host, "nccl")["env"])
    assert summary is not None
    assert summary["variants"] == ["nccl:Ring/LL"]
    assert summary["broken"] == []
    assert summary["worst_ratio"] == 3.247
    assert summary["worst_at"] == "eager 256 MiB"
    assert summary["ok"] is False
    assert summary["summary"] == "3.247× the winner (nccl:default) at eager 256 MiB"
    found = verdict(evaluate(pack_rules(), make_run(h=host)), "allreduce-configured-variant", "h")
    assert found.status == "fail"


def test_a_configured_algorithm_near_the_winner_passes() -> None:
    # Only NCCL_ALGO set: NCCL picks the protocol, so the best Ring variant per size counts.
    host = configured(with_matrix(real_host()), NCCL_ALGO="Ring")
    summary = configured_variant(data(host, "allreduce")["matrix"], data(host, "nccl")["env"])
    assert summary is not None
    assert summary["ok"] is True
    assert summary["variants"] == ["nccl:Ring/LL", "nccl:Ring/Simple"]
    found = verdict(evaluate(pack_rules(), make_run(h=host)), "allreduce-configured-variant", "h")
    assert found.status == "pass"


def test_without_nccl_settings_or_without_a_matrix_the_rule_does_not_apply() -> None:
    report = evaluate(
        pack_rules(),
        make_run(
            plain=with_matrix(real_host()), nomatrix=configured(real_host(), NCCL_ALGO="Tree")
        ),
    )
    for host in ("plain", "nomatrix"):
        assert verdict(report, "allreduce-configured-variant", host).status == "n/a"


# ----------------------------------------------------------------------------- the terminal


def test_terminal_shows_winner_bands_and_failures_per_cohort() -> None:
    run = make_run(
        a=with_matrix(real_host(), ring_ll_8b=21.0), b=with_matrix(real_host(), ring_ll_8b=20.0)
    )
    diff = compare_hosts(run.hosts.values(), declared_facts())
    summary = cohort_matrices([(c.name, [run.hosts[h] for h in c.hosts]) for c in diff.cohorts])
    assert len(summary) == 1
    assert summary[0].hosts == 2
    assert ("nccl:Tree/LL", "graph 8 B", 2) in summary[0].failures
    assert ("nccl:CollnetDirect/LL", "failed", 2) in summary[0].failures
    assert summary[0].winners["eager"]["8 B"] == (("nccl:Ring/LL", 2),)
    table = allreduce_matrix_table(run, diff)
    assert table is not None
    console = Console(file=io.StringIO(), width=200)
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "8 B nccl:Ring/LL" in text
    assert "256 MiB nccl:default" in text
    assert "nccl:Tree/LL: graph 8 B (2)" in text


def test_no_matrix_no_table() -> None:
    run = make_run(a=real_host())
    assert allreduce_matrix_table(run, compare_hosts(run.hosts.values(), declared_facts())) is None


# ------------------------------------------------------------------------- diff and drift


def test_diff_compares_winners_and_failures_not_timings() -> None:
    run = make_run(
        a=with_matrix(real_host()),
        b=with_matrix(real_host()),
        c=with_matrix(real_host(), tree_graph_fails=False, ring_ll_8b=20.0),
    )
    diff = compare_hosts(run.hosts.values(), declared_facts())
    values = {d.fact: d for d in diff.values}
    status = values['allreduce.matrix.variants."nccl:Tree/LL".status']
    assert status.majority == "partial"
    assert status.others == (("ok", ("c",)),)
    winner = values['allreduce.matrix.winners.graph."8 B"']
    assert winner.majority == "nccl:default"
    assert winner.others == (("nccl:Tree/LL", ("c",)),)
    sets = {s.fact: s for s in diff.sets}
    assert 'allreduce.matrix.variants."nccl:Tree/LL".failed_at' in sets
    assert not [f for f in values if ".rows" in f or "elapsed_s" in f]


def test_drift_reports_a_new_winner_and_a_new_failure() -> None:
    old = make_run(a=with_matrix(real_host(), tree_graph_fails=False))
    new = make_run(a=with_matrix(real_host()))
    drift = compare_runs(old, new, declared_facts())
    changed = {(c.fact, c.kind, c.old, c.new) for c in drift.changes}
    assert ('allreduce.matrix.variants."nccl:Tree/LL".status', "value", "ok", "partial") in changed
    assert ('allreduce.matrix.variants."nccl:Tree/LL".failed_at', "added", None, "graph 8 B") in {
        (f, k, None, n) for f, k, _, n in changed
    }
    assert (
        'allreduce.matrix.winners.graph."8 B"',
        "value",
        "nccl:Tree/LL",
        "nccl:default",
    ) in changed


# ------------------------------------------------------------------------------ asking for it


def test_the_matrix_flag_asks_the_probe_for_its_matrix_and_gives_the_host_time() -> None:
    options = ProbeOptions(values={"allreduce": False, "allreduce_matrix": True, "quick": True})
    assert probe_args_from(options) == {"allreduce": {"quick": True, "matrix": True}}
    assert "allreduce" in build_probe_bundle(options).probes  # the matrix brings its probe
    assert options.host_timeout_s == 300
    assert ProbeOptions(values={"allreduce_matrix": True}, timeout_s=900).host_timeout_s == 900
    assert ProbeOptions().host_timeout_s == 120
    assert "matrix" not in probe_args_from(ProbeOptions()).get("allreduce", {})


def test_probe_and_check_both_take_the_matrix_flag(tmp_path: Path) -> None:
    for command in ("probe", "check"):
        shown = invoke_fleet(tmp_path, command, "--help")
        assert "--allreduce-matrix" in shown.stdout


def test_the_real_h200_matrix_reads_back_with_its_winners_and_failures(tmp_path: Path) -> None:
    """The golden run from the 2xH200 machine: the terminal view names the real winners and the
    variants NCCL refused there, and a host configured with a refused algorithm gets the warning."""
    recorded = ROOT / "tests" / "probes" / "golden" / "real_run" / "h200x2_matrix_run.json"
    run = read_run_file(recorded)
    matrix = run.hosts["local"].probes["allreduce"].data["matrix"]
    assert matrix["elapsed_s"] < 60
    assert matrix["variants"]["nccl:PAT/LL"]["status"] == "failed"
    assert matrix["variants"]["nccl:Ring/Simple"]["status"] == "ok"
    console = Console(file=io.StringIO(), width=200)
    console.print(allreduce_matrix_table(run, compare_hosts(run.hosts.values(), declared_facts())))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "symm_mem:two_shot_all_reduce_" in shown
    assert "nccl:PAT/LL: failed" in shown
    pat = configured_variant(matrix, {"NCCL_ALGO": "PAT"})
    assert pat is not None
    assert pat["ok"] is False
