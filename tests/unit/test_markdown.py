"""The Markdown forms of a diff, read back by a real CommonMark parser with GFM tables
(markdown-it-py): every row keeps its cells, whatever the values hold (issue 12, item 4)."""

from __future__ import annotations

import json

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from fleet.render.documents import drift_markdown, fleet_diff_markdown, md_code, md_text
from tests.cli.inprocess import LOOPBACK8, run_document
from tests.markdown_tables import table_rows

SPEC = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"


def two_host_run() -> Run:
    """The recorded loopback run cut to gpu-01 and gpu-07 (whose torch has only _SymmetricMemory)."""
    document = run_document(LOOPBACK8)
    document["hosts"] = {k: v for k, v in document["hosts"].items() if k in ("gpu-01", "gpu-07")}
    return Run.from_dict(document)


def test_two_host_diff_parses_as_a_table_with_three_cells_per_row() -> None:
    markdown = fleet_diff_markdown(compare_hosts(two_host_run().hosts.values(), declared_facts()))
    rows = table_rows(markdown)
    assert rows[0] == ["fact", "majority", "differs on"]
    assert len(rows) >= 3
    assert all(len(row) == 3 for row in rows), rows
    spec_row = next(row for row in rows if SPEC in row[0])
    assert "gpu-07" in spec_row[2] or "gpu-07" in spec_row[1], spec_row


def test_drift_markdown_keeps_its_cells_when_values_hold_pipes() -> None:
    old = two_host_run()
    document = json.loads(json.dumps(old.to_dict()))
    imports = document["hosts"]["gpu-01"]["probes"]["imports"]["data"]["results"]
    imports[SPEC]["resolved"] = "a|b *c* <d> `e`"
    rows = table_rows(drift_markdown(compare_runs(old, Run.from_dict(document), declared_facts())))
    assert len(rows) >= 2
    assert all(len(row) == 3 for row in rows), rows
    assert any("a|b *c* <d> `e`" in row[1] for row in rows), rows


def test_escaped_text_and_code_read_back_as_written() -> None:
    for text in ("a|b", "_x_ *y* [z](w) <b>", "`tick` and ``two``", "back\\slash"):
        row = f"| {md_text(text)} | {md_code(text)} |"
        rows = table_rows(f"| a | b |\n| --- | --- |\n{row}\n")
        assert rows[1] == [text, text], (text, rows)


def test_not_compared_is_one_bullet_per_probe_and_reason_with_hosts_folded() -> None:
    """Issue 24 item 11: one bullet per host × probe made a 1,000-host fleet 1,000s of lines.
    Hosts are folded per probe and reason; hosts not reached fold too, their own names and
    targets aside."""
    document = run_document(LOOPBACK8)
    for name, host in document["hosts"].items():
        if name in ("gpu-02", "gpu-03", "gpu-04"):
            host.update(
                status="unreachable",
                error=f"cannot connect to {name} (ops@10.0.0.{name[-1]}:22): connection refused",
                probes={},
            )
            continue
        host["probes"]["nccl"].update(status="absent", error="no NCCL library found", data={})
    run = Run.from_dict(document)
    markdown = fleet_diff_markdown(compare_hosts(run.hosts.values(), declared_facts()))
    bullets = [line for line in markdown.splitlines() if line.startswith("- not compared")]
    assert bullets == [
        "- not compared: `nccl` on gpu-\\[01,05-08\\] (absent: no NCCL library found)",
        "- not compared: gpu-\\[02-04\\] (unreachable: e.g. cannot connect to gpu-02"
        " (ops@10.0.0.2:22): connection refused)",
    ], markdown
