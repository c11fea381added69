"""`fleet diff` / `fleet show` with --cohort-by and --between, and an inventory's cohort_by
recorded in the run it probes (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.inprocess import MIXED8, invoke, run_document, write_run


def test_cohort_by_on_the_command_line_regroups_the_hosts(tmp_path: Path) -> None:
    done = invoke(tmp_path, "diff", str(MIXED8), "--cohort-by", "gpu.interconnect", columns=80)
    assert done.exit_code == 0, done.output
    assert "cohorts (--cohort-by gpu.interconnect):" in done.stdout
    assert "  pcie  h[03-08]" in done.stdout
    document = json.loads(
        invoke(tmp_path, "diff", str(MIXED8), "--cohort-by", "gpu.interconnect",
               "--json", "-").stdout
    )  # fmt: skip
    assert document["cohort_by"] == "gpu.interconnect"
    assert [c["name"] for c in document["cohorts"]] == ["pcie", "nvlink"]


def test_a_bad_cohort_by_exits_2_naming_it(tmp_path: Path) -> None:
    done = invoke(tmp_path, "show", str(MIXED8), "--cohort-by", "gpu.[")
    assert done.exit_code == 2
    assert "--cohort-by 'gpu.[' is not a JMESPath expression" in done.stderr


def test_between_lists_the_hardware_in_every_format(tmp_path: Path) -> None:
    plain = invoke(tmp_path, "diff", str(MIXED8), columns=80).stdout
    assert "fleet diff RUN --between lists them" in plain
    assert "gpu.interconnect" not in plain
    listed = invoke(tmp_path, "diff", str(MIXED8), "--between", columns=80).stdout
    assert "    gpu.interconnect  pcie | nvlink" in listed
    markdown = invoke(tmp_path, "show", str(MIXED8), "--between", "--format", "markdown").stdout
    assert "| `gpu.interconnect` | pcie | nvlink |" in markdown
    shown = invoke(tmp_path, "show", str(MIXED8), "--between", columns=80).stdout
    assert "key facts" in shown  # the whole run view, its diff with the hardware listed
    assert "    gpu.interconnect  pcie | nvlink" in shown


def test_the_runs_own_cohort_by_is_used_unless_the_command_line_says(tmp_path: Path) -> None:
    document = {**run_document(MIXED8), "cohort_by": "torch.version"}
    path = write_run(tmp_path / "run.json", document)
    recorded = json.loads(invoke(tmp_path, "diff", str(path), "--json", "-").stdout)
    assert {c["name"] for c in recorded["cohorts"]} == {"2.11.0+cu130", "2.6.0+cu124"}
    overridden = json.loads(
        invoke(tmp_path, "diff", str(path), "--cohort-by", "gpu.interconnect",
               "--json", "-").stdout
    )  # fmt: skip
    assert {c["name"] for c in overridden["cohorts"]} == {"pcie", "nvlink"}


def test_an_inventorys_cohort_by_is_recorded_in_the_run(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("cohort_by: _host.name\nhosts:\n  local: {transport: local}\n")
    done = invoke(tmp_path, "probe", "-i", str(inventory), "-p", "system", "--json", "-")
    assert done.exit_code == 0, done.output
    run = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert run["cohort_by"] == "_host.name"
