"""Findings first (issue 23): the diff of mixed fleets read per cohort and ranked, over run documents
of real captures (tests/mixed_fleets.py): the recorded mixed loopback run (2× H200 beside 8× RTX PRO
6000 Blackwell, one torch without sm_120, one host with NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree), the
real H200 machine beside those Blackwell hosts, and 1,000-host fleets made of them."""

from __future__ import annotations

import copy
import io
import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from fleet.analysis.across_hosts.diff import FleetDiff, compare_hosts
from fleet.analysis.across_hosts.findings import CHECK, COHORT, HARDWARE, SOFTWARE
from fleet.analysis.facts import declared_facts
from fleet.errors import UsageError
from fleet.models import Run
from fleet.render.documents import fleet_diff_document, fleet_diff_markdown
from fleet.render.terminal.diff import fleet_diff_view
from tests.markdown_tables import table_rows
from tests.mixed_fleets import mixed8, mixed_fleet, real_h200_with_blackwell

DECLARED = declared_facts()
BLACKWELL = "8× NVIDIA RTX PRO 6000 Blackwell Server Edition · pcie"
H200 = "2× NVIDIA H200 · nvlink"
SYMM = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"


def diff_of(document: dict[str, Any], cohort_by: str | None = None) -> FleetDiff:
    return compare_hosts(Run.from_dict(document).hosts.values(), DECLARED, cohort_by=cohort_by)


def terminal(diff: FleetDiff, width: int = 80, between: bool = False) -> list[str]:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(fleet_diff_view(diff, between), crop=False)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined, no-any-return]


# ----------------------------------------------------------------------------- the analysis


def test_cohorts_are_gpu_model_count_and_interconnect_with_short_unique_labels() -> None:
    diff = diff_of(mixed8())
    assert [(c.name, c.label, c.hosts) for c in diff.cohorts] == [
        (BLACKWELL, "8× RTX PRO 6000 Blackwell", ("h03", "h04", "h05", "h06", "h07", "h08")),
        (H200, "2× H200", ("h01", "h02")),
    ]
    assert diff.cohort_by is None


def test_findings_are_ranked_check_grade_first() -> None:
    diff = diff_of(mixed8())
    found = [(f.rank, f.kind, f.cohort, f.hosts) for f in diff.findings]
    assert found == [
        (CHECK, "arch", BLACKWELL, ("h05",)),
        (CHECK, "nccl", BLACKWELL, ("h07",)),
        (CHECK, "import", BLACKWELL, ("h05",)),
        (COHORT, "cohort", BLACKWELL, ("h05",)),
        (SOFTWARE, "software", None, ("h01", "h02")),
        (HARDWARE, "hardware", None, ()),
    ]
    arch, nccl, imports, _, software, hardware = diff.findings
    assert arch.title == (
        "torch 2.6.0+cu124 cannot run on its GPUs: its arch list lacks sm_120 "
        "(8× RTX PRO 6000 Blackwell)"
    )
    assert "torch.arch_list" in arch.facts
    assert "torch.devices[7].arch_supported" in arch.facts
    assert nccl.title == (
        "NCCL transport settings differ: NCCL_ALGO=Tree, NCCL_P2P_DISABLE=1 "
        "(the rest of 8× RTX PRO 6000 Blackwell: unset)"
    )
    assert imports.title == (
        f"{SYMM} resolves to _SymmetricMemory (the rest of 8× RTX PRO 6000 Blackwell: "
        "SymmetricMemory)"
    )
    assert software.facts == ("gpu.driver_version",)
    assert hardware.pair == (BLACKWELL, H200)
    assert hardware.title.startswith("8× RTX PRO 6000 Blackwell vs 2× H200: ")
    assert diff.odd_hosts == ("h05", "h07")  # not the H200 pair: a cohort of its own


def test_every_differing_fact_is_tagged_and_accounted_for() -> None:
    diff = diff_of(mixed8())
    facts = [*diff.values, *diff.sets]
    assert len(facts) == 230
    names = {c.name for c in diff.cohorts}
    for item in facts:
        assert item.within or item.between, item.fact
        assert set(item.within) <= names
        assert all(pair == (BLACKWELL, H200) for pair in item.between)
    accounted = {name for f in diff.findings for name in f.facts}
    assert {item.fact for item in facts} == accounted
    by_name = {item.fact: item for item in facts}
    assert by_name["gpu.gpus[0].name"].between == ((BLACKWELL, H200),)
    assert by_name["gpu.gpus[0].name"].hardware
    assert by_name["gpu.gpus[0].name"].within == ()
    assert by_name["nccl.env.NCCL_P2P_DISABLE"].within == (BLACKWELL,)
    assert by_name["nccl.env.NCCL_P2P_DISABLE"].between == ()
    assert by_name["gpu.driver_version"].between == ((BLACKWELL, H200),)
    assert not by_name["gpu.driver_version"].hardware  # software: the same code runs everywhere
    # devices the H200 boxes do not have follow from the hardware, whatever the fact
    assert by_name["torch.devices[5].arch_supported"].hardware is False  # h05 differs within
    assert by_name["torch.devices[5].ptx_fallback"].hardware


def test_the_recorded_uniform_fleet_is_one_cohort() -> None:
    from tests.cli.inprocess import LOOPBACK8, run_document

    diff = diff_of(run_document(LOOPBACK8))
    assert [c.label for c in diff.cohorts] == ["2× H200"]
    assert [(f.kind, f.hosts) for f in diff.findings] == [
        ("nccl", ("gpu-08",)),
        ("import", ("gpu-07",)),
        ("cohort", ("gpu-07",)),
    ]
    assert diff.odd_hosts == ("gpu-07", "gpu-08")


def test_software_that_differs_between_cohorts_stays_a_finding_naming_the_cohorts() -> None:
    """The real H200 machine beside the Blackwell stacks: other Python, torch builds, dir() names
    and libraries. Those are findings between cohorts; the hardware is one line."""
    diff = diff_of(real_h200_with_blackwell())
    ranks = [f.rank for f in diff.findings]
    assert ranks == sorted(ranks)
    [software] = diff.ranked(SOFTWARE)
    assert "between 8× RTX PRO 6000 Blackwell and 2× H200" in software.title
    assert 'dir.modules."torch.distributed".names' in software.facts
    assert "gpu.driver_version" in software.facts
    imports = [f for f in diff.ranked(CHECK) if f.kind == "import" and f.cohort is None]
    assert {f.title.split()[0] for f in imports} == {SYMM, "triton"}
    assert all(f.hosts == ("h01", "h02") for f in imports)
    [hardware] = diff.ranked(HARDWARE)
    assert not set(software.facts) & set(hardware.facts)


def test_a_cohort_whose_torch_lacks_its_arch_is_check_grade_across_cohorts() -> None:
    document = mixed8()
    for name in ("h03", "h04", "h06", "h07", "h08"):
        document["hosts"][name]["probes"] = copy.deepcopy(document["hosts"]["h05"]["probes"])
    diff = diff_of(document)
    arch = [f for f in diff.findings if f.kind == "arch"]
    assert [(f.cohort, f.hosts) for f in arch] == [
        (BLACKWELL, ("h03", "h04", "h05", "h06", "h07", "h08"))
    ]
    assert "torch.arch_list" in arch[0].facts  # the difference between cohorts it explains
    assert diff.ranked(COHORT) == ()  # each cohort is alike within


def test_no_gpu_is_a_cohort_and_a_split_cohort_has_no_odd_host() -> None:
    document = mixed8()
    bare = copy.deepcopy(document["hosts"]["h01"])
    bare["probes"]["gpu"] = {"status": "absent", "ok": False, "data": {}, "error": "no nvidia-smi"}
    bare["probes"]["torch"]["data"]["version"] = "2.12.0+cu130"
    other = copy.deepcopy(bare)
    other["probes"]["torch"]["data"]["version"] = "2.13.0+cu130"
    document["hosts"] = {"cpu-1": bare, "cpu-2": other, "h01": document["hosts"]["h01"]}
    diff = diff_of(document)
    assert {c.name for c in diff.cohorts} == {"no GPU", H200}
    split = [f for f in diff.ranked(COHORT) if f.cohort == "no GPU"]
    assert len(split) == 1
    assert "split" in split[0].title
    assert diff.odd_hosts == ()


# ------------------------------------------------------------------------------- cohort_by


def test_cohort_by_a_jmespath_over_the_host_document() -> None:
    diff = diff_of(mixed8(), cohort_by="torch.version")
    assert [(c.name, len(c.hosts)) for c in diff.cohorts] == [
        ("2.11.0+cu130", 7),
        ("2.6.0+cu124", 1),
    ]
    assert diff.cohort_by == "torch.version"
    by_list = diff_of(mixed8(), cohort_by="[gpu.interconnect, _host.name == 'h07']")
    assert {c.name for c in by_list.cohorts} == {
        "pcie · false",
        "pcie · true",
        "nvlink · false",
    }
    nothing = diff_of(mixed8(), cohort_by="no.such.fact")
    assert [c.name for c in nothing.cohorts] == ["(no value)"]


def test_a_bad_cohort_by_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not a JMESPath expression"):
        diff_of(mixed8(), cohort_by="gpu.[")


def test_a_run_recorded_with_cohort_by_is_diffed_that_way() -> None:
    from fleet import api

    document = {**mixed8(), "cohort_by": "gpu.interconnect"}
    run = Run.from_dict(document)
    assert run.cohort_by == "gpu.interconnect"
    assert Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    assert {c.name for c in api.cross_host_diff(run).cohorts} == {"pcie", "nvlink"}
    again = api.cross_host_diff(run, cohort_by="torch.version")  # the command line wins
    assert {c.name for c in again.cohorts} == {"2.11.0+cu130", "2.6.0+cu124"}


# --------------------------------------------------------------------------------- surfaces


def test_terminal_puts_the_two_real_problems_first_and_fits_80_columns() -> None:
    lines = terminal(diff_of(mixed8()))
    assert lines[:13] == [
        "divergence: 8 hosts · 2 cohorts · odd: h[05,07] · 230 fact(s) differ",
        "cohorts (GPU model × GPU count × interconnect):",
        "  8× RTX PRO 6000 Blackwell  h[03-08]",
        "    (8× NVIDIA RTX PRO 6000 Blackwell Server Edition · pcie)",
        "  2× H200  h[01-02] (2× NVIDIA H200 · nvlink)",
        "check-grade:",
        "  ✗ h05  torch 2.6.0+cu124 cannot run on its GPUs: its arch list lacks sm_120",
        "         (8× RTX PRO 6000 Blackwell)",
        "  ✗ h07  NCCL transport settings differ: NCCL_ALGO=Tree, NCCL_P2P_DISABLE=1 (the",
        "         rest of 8× RTX PRO 6000 Blackwell: unset)",
        f"  ✗ h05  {SYMM}",
        "         resolves to _SymmetricMemory (the rest of 8× RTX PRO 6000 Blackwell:",
        "         SymmetricMemory)",
    ]
    assert lines[13:15] == [
        "in cohort 8× RTX PRO 6000 Blackwell (h[03-08]):",
        "  h05: 11 fact(s) unlike the rest (h[03-04,06-08])",
    ]
    assert "    torch.version  2.6.0+cu124 on h05 (rest: 2.11.0+cu130)" in lines
    assert lines[-2:] == [
        "  8× RTX PRO 6000 Blackwell vs 2× H200: 212 hardware fact(s) differ, as",
        "    expected: fleet diff RUN --between lists them",
    ]
    assert len(lines) <= 40
    too_wide = [line for line in lines if len(line) > 80]
    assert all(len(line.split()) == 1 for line in too_wide), too_wide  # a name alone, whole
    text = "\n".join(lines)
    assert "(unset)" not in text  # no device the H200 boxes lack, listed against them
    assert "gpu.gpus[" not in text  # hardware: one line for the pair


def test_between_lists_each_pairs_hardware_facts_devices_said_once() -> None:
    lines = terminal(diff_of(mixed8()), width=100, between=True)
    text = "\n".join(lines)
    start = lines.index("between cohorts, hardware:")
    assert lines[start + 1 : start + 3] == [
        "  8× RTX PRO 6000 Blackwell vs 2× H200: 212 hardware fact(s) differ, as expected",
        "    (8× RTX PRO 6000 Blackwell | 2× H200):",
    ]
    listed = lines[start + 3 :]
    assert "    gpu.interconnect  pcie | nvlink" in listed
    assert "    gpu.gpus[*].compute_capability  12.0 | 9.0 (2 facts)" in listed
    assert "    gpu.gpus[*].compute_capability  12.0 | — (6 facts)" in listed
    assert "    gpu.gpus[*].index  values vary by device | — (6 facts)" in listed
    assert "gpu.gpus[2].index" not in text
    assert len(listed) < 45  # 212 facts


def test_markdown_has_a_table_per_cohort_and_no_by_device_rows() -> None:
    markdown = fleet_diff_markdown(diff_of(mixed8()))
    assert "(by device)" not in markdown
    assert "### In cohort 8× RTX PRO 6000 Blackwell (h\\[03-08\\])" in markdown
    assert "In cohort 2× H200" not in markdown  # nothing differs inside it
    rows = table_rows(markdown)
    assert rows[0] == ["cohort", "hosts", "key"]
    assert ["2× H200", "h[01-02]", H200] in rows
    assert ["torch.devices[*].arch_supported", "True", "False: h05 (8 devices alike)"] in rows
    assert ["gpu.driver_version", "580.65.06", "580.159.04"] in rows  # software between cohorts
    assert all(len(row) == 3 for row in rows), rows
    findings = markdown[
        markdown.index("### Divergence, most serious first") : markdown.index("### In cohort")
    ]
    numbered = [line for line in findings.splitlines() if line[:1].isdigit()]
    assert [line.split(" · ")[0] for line in numbered] == [
        "1. **check**",
        "2. **check**",
        "3. **check**",
        "4. **in cohort**",
        "5. **software**",
        "6. **hardware**",
    ]
    assert "`fleet diff RUN --between` lists them" in numbered[-1]


def test_json_document_keeps_every_fact_tagged_and_the_findings() -> None:
    document = json.loads(json.dumps(fleet_diff_document(diff_of(mixed8())), default=str))
    assert document["schema"] == "fleet.diff/3"
    assert document["odd_hosts"] == ["h05", "h07"]
    assert [c["label"] for c in document["cohorts"]] == ["8× RTX PRO 6000 Blackwell", "2× H200"]
    assert len(document["values"]) + len(document["sets"]) == 230
    finding = document["findings"][0]
    assert {"kind", "rank", "title", "hosts", "cohort", "facts", "values", "sets", "across"} <= set(
        finding
    )
    hardware = document["findings"][-1]
    assert hardware["kind"] == "hardware"
    assert len(hardware["facts"]) == len(hardware["across"]) == 212
    assert hardware["across"][0]["groups"][0][1] in ([BLACKWELL], [H200])


# ------------------------------------------------------------------------------------ scale


def calls_of(action: Callable[[], object]) -> int:
    """Python and C calls made by `action`: an operation count, the same on any machine."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.slow
def test_a_mixed_diff_grows_linearly_with_the_hosts() -> None:
    """800 hosts cost at most ~10× 80 hosts: per fact and per host (or per group of alike
    hosts), never per pair of hosts. (bench/diff_scale.py times it: ≤ 0.5 s at 1,000.)"""
    small, big = (Run.from_dict(mixed_fleet(n)) for n in (80, 800))
    diff = compare_hosts(big.hosts.values(), DECLARED)
    assert [f.kind for f in diff.findings] == [
        "arch", "nccl", "import", "cohort", "software", "hardware",
    ]  # fmt: skip
    assert diff.odd_hosts == ("gpu-0007", "gpu-0008", "gpu-0400", "gpu-0401")
    cost_small = calls_of(lambda: compare_hosts(small.hosts.values(), DECLARED))
    cost_big = calls_of(lambda: compare_hosts(big.hosts.values(), DECLARED))
    assert cost_big < 11 * cost_small, (cost_small, cost_big)
