"""The diff as people read it: a recorded 8-host run with 2 odd hosts, rendered to a string."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.models import Run
from fleet.render.documents import (
    drift_document,
    drift_markdown,
    fleet_diff_document,
    fleet_diff_markdown,
)
from fleet.render.terminal.diff import drift_view, fleet_diff_view
from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
SYMM = "torch.distributed._symmetric_memory"
EXPECTED_FACTS = {
    f'dir.modules."{SYMM}".names',
    f'imports.results."{SYMM}:SymmetricMemory|_SymmetricMemory".resolved',
    "nccl.env.NCCL_P2P_DISABLE",
    "torch.symmetric_memory.class_name",
}


def recorded() -> Run:
    return Run.from_dict(json.loads(RECORDED.read_text()))


def render(renderable: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_recorded_run_names_exactly_the_odd_hosts_and_their_facts() -> None:
    diff = compare_hosts(recorded().hosts.values(), declared_facts())
    assert diff.odd_hosts == ("gpu-07", "gpu-08")
    assert {d.fact for d in diff.values} | {s.fact for s in diff.sets} == EXPECTED_FACTS
    assert diff.outliers == ()
    assert diff.unreported == ()


@pytest.mark.parametrize("width", [80, 200])
def test_terminal_view_reads_at_80_and_200_columns(width: int) -> None:
    text = render(
        fleet_diff_view(compare_hosts(recorded().hosts.values(), declared_facts())), width
    )
    lines = text.splitlines()
    assert lines[0] == "divergence: 8 hosts · odd: gpu-[07-08] · 4 fact(s) differ"
    assert lines[1] == "check-grade:"  # NCCL transport, then the import: one line each
    assert lines[2].startswith("  ✗ gpu-08  NCCL transport settings differ: NCCL_P2P_DISABLE=1")
    assert "✗ gpu-07  torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory" in text
    assert "resolves to _SymmetricMemory (the rest of 2× H200: SymmetricMemory)" in text
    assert "in cohort 2× H200 (every host):" in text  # one cohort: named once
    assert "  gpu-07: 2 fact(s) unlike the rest (gpu-[01-06,08])" in text
    assert '    dir.modules."torch.distributed._symmetric_memory".names  −SymmetricMemory' in text
    assert "    torch.symmetric_memory.class_name  _SymmetricMemory on gpu-07" in text
    assert "gpu-01 " not in text  # the alike hosts are folded, never listed one by one
    assert max(len(line) for line in lines) <= width


def test_json_and_markdown_forms() -> None:
    diff = compare_hosts(recorded().hosts.values(), declared_facts())
    document = json.loads(json.dumps(fleet_diff_document(diff)))
    assert document["schema"] == "fleet.diff/3"
    assert document["odd_hosts"] == [
        "gpu-07",
        "gpu-08",
    ]
    markdown = fleet_diff_markdown(diff)
    assert "| `nccl.env.NCCL_P2P_DISABLE` | (unset) | 1: gpu-08 |" in markdown


def test_drift_of_one_host_renders_that_change_only() -> None:
    old = recorded()
    document = json.loads(RECORDED.read_text())
    document["hosts"]["gpu-03"]["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    new = Run.from_dict(document)
    drift = compare_runs(old, new, declared_facts())
    text = render(drift_view(drift), 100)
    assert "torch.version  2.11.0+cu130 → 2.12.0+cu130  gpu-03" in text
    assert drift_document(drift)["changed_hosts"] == ["gpu-03"]
    assert "| `torch.version` | 2.11.0+cu130 → 2.12.0+cu130 | gpu-03 |" in drift_markdown(drift)
