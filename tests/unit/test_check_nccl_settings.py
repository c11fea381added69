"""NCCL settings that differ inside a cohort (issue 13.2): six PCIe hosts of one GPU model, built
from real data (the H200 run's probes, the 8x RTX PRO 6000 box's nvidia-smi capture), one of them
with NCCL_P2P_DISABLE=1 and NCCL_ALGO=Tree. Before `uniform_keys`, it passed every rule."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console

from fleet.checks import evaluate
from fleet.render.terminal.checks import render_report
from tests.recorded import RTX, data, make_run, rtx_pcie_host
from tests.unit.helpers import failures, pack_rules, rules, verdict


def pcie_fleet(**odd_env: dict[str, str]) -> Any:
    hosts = {f"rtx-0{i}": rtx_pcie_host() for i in range(1, 7)}
    for name, env in odd_env.items():
        data(hosts[name], "nccl")["env"].update(env)
    return make_run(**hosts)


def nccl_failures(report: Any) -> set[tuple[str, str]]:
    return {(rule, host) for rule, host in failures(report) if rule.startswith("nccl-")}


def test_one_host_with_p2p_disabled_and_a_forced_algo_fails_as_an_error() -> None:
    run = pcie_fleet(**{"rtx-04": {"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Tree"}})
    report = evaluate(pack_rules(), run)
    assert nccl_failures(report) == {("nccl-transport-settings-uniform", "rtx-04")}
    assert report.failed  # severity error: exit bit 32
    odd = verdict(report, "nccl-transport-settings-uniform", "rtx-04")
    assert odd.observed == {"NCCL_ALGO": "Tree", "NCCL_P2P_DISABLE": "1"}
    assert odd.expected == {"NCCL_ALGO": None, "NCCL_P2P_DISABLE": None}
    assert odd.fix.startswith(
        "rtx-04: NCCL_ALGO=Tree, NCCL_P2P_DISABLE=1, where the other "
        f"{RTX} hosts have NCCL_ALGO unset, NCCL_P2P_DISABLE unset."
    ), odd.fix
    assert verdict(report, "nccl-transport-settings-uniform", "rtx-01").status == "pass"


def test_a_setting_the_majority_has_fails_the_hosts_without_it_with_the_majoritys_value() -> None:
    ifname = {"NCCL_SOCKET_IFNAME": "ens1f0"}
    run = pcie_fleet(
        **{f"rtx-0{i}": ifname for i in (1, 2, 3, 5)}, **{"rtx-06": {"NCCL_SOCKET_IFNAME": "eth0"}}
    )
    report = evaluate(pack_rules(), run)
    assert nccl_failures(report) == {
        ("nccl-transport-settings-uniform", "rtx-04"),
        ("nccl-transport-settings-uniform", "rtx-06"),
    }
    lacking = verdict(report, "nccl-transport-settings-uniform", "rtx-04")
    assert lacking.observed == {"NCCL_SOCKET_IFNAME": None}
    assert "NCCL_SOCKET_IFNAME unset, where the other" in lacking.fix
    assert "have NCCL_SOCKET_IFNAME=ens1f0" in lacking.fix


def test_other_nccl_variables_are_a_warning_and_the_container_label_is_ignored() -> None:
    run = pcie_fleet(**{"rtx-02": {"NCCL_DEBUG": "INFO", "NCCL_VERSION": "2.21.5-1"}})
    report = evaluate(pack_rules(), run)
    assert nccl_failures(report) == {("nccl-other-settings-uniform", "rtx-02")}
    assert not report.failed  # a warning never fails the check
    odd = verdict(report, "nccl-other-settings-uniform", "rtx-02")
    assert odd.observed == {"NCCL_DEBUG": "INFO"}


def test_settings_from_nccl_conf_count_and_the_environment_wins() -> None:
    run = pcie_fleet()
    first = run.hosts["rtx-01"].probes["nccl"].data
    first["conf_files"]["/etc/nccl.conf"]["NCCL_PROTO"] = "Simple"
    run.hosts["rtx-02"].probes["nccl"].data["conf_files"]["/etc/nccl.conf"]["NCCL_PROTO"] = "LL"
    run.hosts["rtx-02"].probes["nccl"].data["env"]["NCCL_PROTO"] = "Simple"  # wins over the file
    report = evaluate(pack_rules(), run)
    assert nccl_failures(report) == {
        ("nccl-transport-settings-uniform", "rtx-01"),
        ("nccl-transport-settings-uniform", "rtx-02"),
    }
    assert {h: "Simple" for h in ("rtx-01", "rtx-02")} == {
        h: verdict(report, "nccl-transport-settings-uniform", h).observed["NCCL_PROTO"]
        for h in ("rtx-01", "rtx-02")
    }


def test_hosts_failing_alike_share_one_fix_that_names_them_all() -> None:
    odd = {"NCCL_P2P_DISABLE": "1"}
    report = evaluate(pack_rules(), pcie_fleet(**{"rtx-03": odd, "rtx-05": odd}))
    fixes = {
        verdict(report, "nccl-transport-settings-uniform", h).fix for h in ("rtx-03", "rtx-05")
    }
    assert len(fixes) == 1
    assert fixes.pop().startswith("rtx-[03,05]: NCCL_P2P_DISABLE=1")
    console = Console(file=StringIO(), width=200)
    render_report(console, report)
    assert console.file.getvalue().count("NCCL_P2P_DISABLE=1, where") == 1  # type: ignore[attr-defined]


KEYS_RULE = """
rules:
  - id: same-settings
    uniform_keys: nccl.env
    fix: "{hosts} have {observed}, not {expected}"
"""


def test_uniform_keys_unknown_where_not_reported_or_not_an_object() -> None:
    run = pcie_fleet()
    run.hosts["rtx-01"].probes["nccl"].data.pop("env")
    run.hosts["rtx-02"].probes["nccl"].data["env"] = ["NCCL_ALGO"]
    report = evaluate(rules(KEYS_RULE), run)
    statuses = {v.host: v.status for v in report.results[0].verdicts}
    assert statuses["rtx-01"] == "unknown"
    assert statuses["rtx-02"] == "unknown"
    assert {statuses[f"rtx-0{i}"] for i in range(3, 7)} == {"pass"}


def test_uniform_keys_without_a_majority_fails_every_host_and_says_why() -> None:
    run = make_run(a=rtx_pcie_host(), b=rtx_pcie_host())
    run.hosts["a"].probes["nccl"].data["env"]["NCCL_ALGO"] = "Ring"
    report = evaluate(rules(KEYS_RULE), run)
    assert {v.status for v in report.results[0].verdicts} == {"fail"}
    assert "NCCL_ALGO: no majority value" in report.results[0].verdicts[0].reason
