"""The rule engine (fleet/checks/) and the built-in inference pack, on plain data.

Recorded runs: every host is built from the real 2× H200 run document
(tests/probes/golden/real_run/h200x2_run.json), with one thing changed per variant.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from fleet.checks import (
    CheckReport,
    RuleFileError,
    available_packs,
    evaluate,
    format_value,
    load_rules,
)
from fleet.models import Run
from fleet.render.junit import junit_tree
from fleet.render.terminal.checks import render_report
from fleet.units.allreduce.facts import allreduce_summary
from tests.recorded import (
    data,
    make_run,
    nccl_p2p_disabled,
    real_host,
    sm120_without_arch,
    variant_fleet,
)
from tests.unit.helpers import PROBES, failures, pack_rules, rules, verdict

SYMM_SPEC = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"


# ------------------------------------------- a rule file judged (fleets: tests/recorded.py)


def judge(text: str, run: Run | None = None) -> CheckReport:
    return evaluate(rules(text), run or make_run(a=real_host()))


# ----------------------------------------------------------------------------- the pack


def test_inference_pack_is_shipped_and_valid() -> None:
    assert "inference" in available_packs()
    loaded = pack_rules()
    ids = [r.id for r in loaded]
    assert len(ids) == len(set(ids)) >= 15
    assert all(
        r.fix and r.description and r.source.endswith(f":{r.source.split(':')[-1]}") for r in loaded
    )


def test_real_h200_run_passes_every_applicable_rule() -> None:
    report = evaluate(pack_rules(), make_run(local=real_host()))
    statuses = {r.rule.id: r.status for r in report.results}
    # The recording predates the live and net probes: rules reading them are skipped ("probe live
    # was not run").
    live = {rule for rule in statuses if rule.startswith(("live-", "net-"))}
    assert live
    assert {statuses[rule] for rule in live} == {"skipped"}
    assert {statuses[rule] for rule in statuses.keys() - live} == {"pass", "n/a"}, statuses
    assert statuses["allreduce-latency-nvlink"] == "pass"
    assert statuses["allreduce-busbw-pcie"] == "n/a"
    assert not report.failed


def test_pack_fails_exactly_the_broken_hosts_on_exactly_their_rules() -> None:
    report = evaluate(pack_rules(), variant_fleet())
    assert failures(report) == {
        ("torch-arch-supported", "sm120"),
        ("nccl-p2p-not-disabled-on-nvlink", "p2p-off"),
        ("nccl-transport-settings-uniform", "p2p-off"),  # its H200 twins leave it unset
        ("allreduce-latency-nvlink", "slow"),
        ("allreduce-busbw-nvlink", "slow"),
    }
    assert report.failed


def test_arch_failure_quotes_the_capability_and_the_arch_list() -> None:
    report = evaluate(pack_rules(), variant_fleet())
    failed = verdict(report, "torch-arch-supported", "sm120")
    assert failed.observed == ["12.0"]
    assert "torch 2.7.0+cu126 has no kernels for compute capability 12.0" in failed.fix
    assert "sm_80, sm_86, sm_90" in failed.fix
    assert "cu128" in failed.fix


def test_p2p_disable_fix_quotes_the_value_and_where_it_applies() -> None:
    report = evaluate(pack_rules(), variant_fleet())
    failed = verdict(report, "nccl-p2p-not-disabled-on-nvlink", "p2p-off")
    assert failed.observed == "1"
    assert failed.fix.startswith("NCCL_P2P_DISABLE=1 on an NVLink host")
    assert verdict(report, "nccl-p2p-not-disabled-on-nvlink", "sm120").status == "n/a"


def test_p2p_disable_in_nccl_conf_counts_too() -> None:
    host = real_host()
    data(host, "nccl")["conf_files"]["/etc/nccl.conf"]["NCCL_P2P_DISABLE"] = "1"
    report = evaluate(pack_rules(), make_run(conf=host))
    assert failures(report) == {("nccl-p2p-not-disabled-on-nvlink", "conf")}


def test_slow_allreduce_reports_observed_numbers_against_the_band() -> None:
    report = evaluate(pack_rules(), variant_fleet())
    latency = verdict(report, "allreduce-latency-nvlink", "slow")
    busbw = verdict(report, "allreduce-busbw-nvlink", "slow")
    rows = real_host()["probes"]["allreduce"]["data"]["results"]
    graph_8b = next(r["latency_us"] for r in rows if r["mode"] == "graph" and r["bytes"] == 8)
    largest = max(rows, key=lambda r: (r["bytes"], r["mode"] == "eager"))  # as the pack picks it
    assert latency.observed == pytest.approx(graph_8b * 3)
    assert busbw.observed == pytest.approx(largest["busbw_gbps"] / 3, rel=0.01)
    assert f"{graph_8b * 3:.2f} µs in graph mode" in latency.fix
    assert "GB/s busbw at 268435456 B" in busbw.fix


def test_absent_allreduce_makes_its_rules_skipped_not_passed() -> None:
    host = real_host()
    host["probes"]["allreduce"].update(status="absent", ok=False, error="torch has no NCCL")
    report = evaluate(pack_rules(), make_run(stub=host))
    skipped = verdict(report, "allreduce-latency-nvlink", "stub")
    assert skipped.status == "skipped"
    assert "probe allreduce absent: torch has no NCCL" in skipped.reason
    assert not report.failed


def test_unreported_fields_are_unknown_not_passed() -> None:
    host = real_host()
    for gpu in data(host, "gpu")["gpus"]:
        gpu.update(persistence_mode=None, mig_mode=None)  # as on the assembled RTX PRO capture
    report = evaluate(pack_rules(), make_run(partial=host))
    assert verdict(report, "persistence-mode", "partial").status == "unknown"
    assert verdict(report, "no-mig", "partial").status == "unknown"
    assert report.counts()["unknown"] == 2
    assert not report.failed


def test_mig_and_persistence_failures() -> None:
    host = real_host()
    data(host, "gpu")["gpus"][1].update(mig_mode="Enabled", persistence_mode="Disabled")
    report = evaluate(pack_rules(), make_run(mig=host))
    assert failures(report) == {("no-mig", "mig"), ("persistence-mode", "mig")}
    assert verdict(report, "no-mig", "mig").observed == ["Disabled", "Enabled"]
    assert report.failed  # no-mig is an error; persistence-mode only a warning
    assert [r.id for r, _ in report.failures("warning")] == ["persistence-mode"]


def test_gpu_count_uses_probe_args_then_the_majority() -> None:
    run = make_run(a=real_host(), b=real_host())
    rules_ = pack_rules()
    assert not evaluate(rules_, run).failed
    report = evaluate(rules_, run, {"a": {"gpu": {"expected_count": 8}}})
    failed = verdict(report, "gpu-count", "a")
    assert (failed.status, failed.observed, failed.expected) == ("fail", 2, 8)
    assert verdict(report, "gpu-count", "b").status == "pass"


def test_p2p_pairs_not_ok_are_named() -> None:
    host = real_host()
    data(host, "gpu")["p2p_read"]["GPU0"]["GPU1"] = "NS"
    report = evaluate(pack_rules(), make_run(p2p=host))
    assert failures(report) == {("p2p-all-pairs", "p2p")}
    assert verdict(report, "p2p-all-pairs", "p2p").observed == ["GPU0→GPU1: NS"]


def test_unreachable_host_is_skipped_everywhere() -> None:
    down = {"status": "unreachable", "error": "connection refused", "address": "x", "probes": {}}
    report = evaluate(pack_rules(), make_run(up=real_host(), down=down))
    result_statuses = {verdict(report, r.rule.id, "down").status for r in report.results}
    assert result_statuses == {"skipped"}
    assert "host unreachable: connection refused" in verdict(report, "same-torch", "down").reason


# -------------------------------------------------------------------- the rule language


def test_check_true_false_null_make_pass_fail_unknown() -> None:
    report = judge(
        """
rules:
  - {id: t, severity: error, check: "torch.cuda_available", fix: f}
  - {id: f, severity: error, check: "torch.version == '1.0'", fix: "want 1.0, have {torch.version}"}
  - {id: u, severity: error, check: "torch.no_such_fact", fix: f}
  - {id: zero, severity: error, check: "`0`", fix: f}
"""
    )
    assert [r.status for r in report.results] == ["pass", "fail", "unknown", "pass"]
    assert report.results[1].failures[0].fix == "want 1.0, have 2.11.0+cu130"
    assert (
        report.results[2].verdicts[0].reason
        == "cannot be judged: torch.no_such_fact is not reported"
    )


def test_numeric_comparison_with_missing_value_is_unknown() -> None:
    report = judge('rules: [{id: r, check: "_allreduce.nothing <= `25`", fix: f}]')
    assert report.results[0].status == "unknown"


def test_when_false_is_not_applicable_and_when_null_unknown() -> None:
    report = judge(
        """
rules:
  - {id: pcie-only, when: "gpu.interconnect == 'pcie'", check: "`false`", fix: f}
  - {id: nvlink-only, when: "gpu.interconnect == 'nvlink'", check: "`false`", fix: f}
  - {id: unreported, when: "gpu.nothing", check: "`false`", fix: f}
"""
    )
    assert [r.status for r in report.results] == ["n/a", "fail", "unknown"]


def test_severity_warning_fails_without_failing_the_check() -> None:
    report = judge('rules: [{id: w, severity: warning, check: "`false`", fix: f}]')
    assert report.results[0].status == "fail"
    assert not report.failed
    assert len(report.failures("warning")) == 1


def test_severity_warn_is_read_as_warning_and_published_as_warn() -> None:
    """`warn`, the old spelling, still reads; fleet.check/3 keeps its word, `warn`."""
    report = judge('rules: [{id: w, severity: warn, check: "`false`", fix: f}]')
    assert report.results[0].rule.severity == "warning"
    document = report.to_dict()
    assert document["rules"][0]["severity"] == "warn"
    assert document["summary"]["failed_warn"] == 1


def test_helper_functions() -> None:
    report = judge(
        """
rules:
  - {id: every, check: "every(map(&arch_supported, torch.devices), `true`)", fix: f}
  - {id: every-null, check: "every(`[true, null]`, `true`)", fix: f}
  - {id: none, check: "none(map(&mig_mode, gpu.gpus), 'Enabled')", fix: f}
  - {id: unique, check: "unique(`[1, 1, 2]`) == `[1, 2]`", fix: f}
  - {id: pairs, check: "pairs_not(gpu.p2p_read, 'OK') == `[]`", fix: f}
"""
    )
    assert [r.status for r in report.results] == ["pass", "unknown", "pass", "pass", "pass"]


def test_observed_is_shown_quoted_and_readable_by_the_check() -> None:
    report = judge(
        """
rules:
  - id: o
    observed: torch.version
    check: "_observed == 'x'"
    fix: "saw {observed}; arch {torch.arch_list[0]}; braces {{literal}}; gone {torch.nothing}"
"""
    )
    failed = report.results[0].failures[0]
    assert failed.observed == "2.11.0+cu130"
    assert failed.fix == "saw 2.11.0+cu130; arch sm_75; braces {literal}; gone (not reported)"


def test_missing_probe_is_skipped_with_its_status_and_error() -> None:
    host = real_host()
    host["probes"]["torch"].update(status="failed", ok=False, error="Segmentation fault")
    del host["probes"]["nccl"]
    report = evaluate(
        rules(
            """
rules:
  - {id: t, check: "torch.cuda_available", fix: f}
  - {id: n, check: "nccl.env", fix: f}
"""
        ),
        make_run(h=host),
    )
    reasons = [r.verdicts[0].reason for r in report.results]
    assert reasons == ["probe torch failed: Segmentation fault", "probe nccl was not run"]
    assert {r.status for r in report.results} == {"skipped"}


def test_needed_probes_come_from_root_fields_only() -> None:
    (rule,) = rules(
        """
rules:
  - id: r
    when: "gpu.interconnect == 'nvlink'"
    check: "length(imports.results.torch.tried[?target == 'nccl']) == `0` && _allreduce.small_bytes"
    fix: "{system.hostname}"
"""
    )
    # `torch` and `nccl` appear only inside imports' data and a filter: not probes this rule needs.
    assert rule.needs == ("allreduce", "gpu", "imports")


# ------------------------------------------------------------------------------- uniform


def versions_run(**versions: str | None) -> Run:
    hosts = {}
    for name, version in versions.items():
        host = real_host()
        data(host, "torch")["version"] = version
        hosts[name] = host
    return make_run(**hosts)


UNIFORM = """
rules:
  - id: same-torch
    uniform: torch.version
    fix: "have {observed}, most have {expected}"
"""


def test_uniform_minority_fails_with_the_majority_expected() -> None:
    report = evaluate(rules(UNIFORM), versions_run(a="2.9", b="2.9", c="2.8", d=None))
    by_host = {v.host: v for v in report.results[0].verdicts}
    assert {h: v.status for h, v in by_host.items()} == {
        "a": "pass",
        "b": "pass",
        "c": "fail",
        "d": "unknown",
    }
    assert by_host["c"].fix == "have 2.8, most have 2.9"


def test_uniform_without_a_majority_fails_every_host_and_says_why() -> None:
    report = evaluate(rules(UNIFORM), versions_run(a="2.9", b="2.8"))
    assert {v.status for v in report.results[0].verdicts} == {"fail"}
    assert "no majority value" in report.results[0].verdicts[0].reason


def test_uniform_compares_within_cohorts() -> None:
    run = make_run(a=real_host(), b=real_host(), bw=sm120_without_arch(real_host()))
    text = UNIFORM + '    cohort: "gpu.gpus[0].name"\n'
    assert evaluate(rules(text), run).results[0].status == "pass"
    assert failures(evaluate(rules(UNIFORM), run)) == {("same-torch", "bw")}


def test_uniform_expected_expression_overrides_the_majority() -> None:
    text = UNIFORM + "    expected: _args.torch.version\n"
    report = evaluate(
        rules(text), versions_run(a="2.9", b="2.9"), {"a": {"torch": {"version": "3.0"}}}
    )
    assert failures(report) == {("same-torch", "a")}


# -------------------------------------------------------------------------- bad rule files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n  - id: a\n    check: [unclosed\n", "rules.yaml:4: not valid YAML"),
        (
            "rules:\n  - {id: a, check: gpu.x, fix: f}\n  - {id: b, chek: x, fix: f}\n",
            "rules.yaml:3: rule 'b': unknown key 'chek'",
        ),
        (
            'rules:\n  - id: a\n    check: "torch.version =="\n    fix: f\n',
            "rules.yaml:3: rule 'a': 'check:' is not a valid JMESPath",
        ),
        (
            "rules:\n  - id: a\n    fix: f\n    check: torhc.version\n",
            "rules.yaml:4: rule 'a': 'check:' reads 'torhc'",
        ),
        (
            "rules:\n  - id: a\n    check: gpu.x != null\n    fix: f\n",
            "rules.yaml:3: rule 'a': 'check:' reads 'null'",
        ),
        (
            "rules:\n  - id: a\n    check: gpu.x\n",
            "rules.yaml:2: rule 'a': 'fix:' must be a non-empty text",
        ),
        (
            "rules:\n  - id: a\n    check: gpu.x\n    uniform: gpu.y\n    fix: f\n",
            "rules.yaml:2: rule 'a': a rule has exactly one of",
        ),
        (
            "rules:\n  - id: a\n    check: gpu.x\n    cohort: gpu.y\n    fix: f\n",
            "rules.yaml:4: rule 'a': 'cohort:' only goes with",
        ),
        (
            "rules:\n  - id: a\n    severity: fatal\n    check: gpu.x\n    fix: f\n",
            "rules.yaml:3: rule 'a': severity 'fatal'",
        ),
        (
            "rules:\n  - id: a\n    check: gpu.x\n    fix: 'see {gpu.[}'\n",
            "rules.yaml:4: rule 'a': 'fix:' is not a valid JMESPath",
        ),
        ("rules:\n  - {id: 'bad id', check: gpu.x, fix: f}\n", "rules.yaml:2: rule id 'bad id'"),
        (
            "rules:\n  - {id: a, check: gpu.x, fix: f}\n  - {id: a, check: gpu.y, fix: f}\n",
            "rules.yaml:3: rule id 'a' is used twice",
        ),
        (
            "rules:\n  - {id: a, check: gpu.x, fix: f, fix: g}\n",
            "rules.yaml:2: duplicate key 'fix'",
        ),
        ("checks: []\n", "rules.yaml:1: a rules file is a mapping with a 'rules:' list"),
        ("rules: []\n", "rules.yaml:1: 'rules:' must be a non-empty list"),
    ],
)
def test_bad_rule_file_names_file_line_and_rule(text: str, message: str) -> None:
    with pytest.raises(RuleFileError) as caught:
        rules(text)
    assert caught.value.message.startswith(message), caught.value.render()


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(RuleFileError, match="does not exist"):
        load_rules(tmp_path / "nope.yaml", PROBES)


# ------------------------------------------------------------------------- JUnit and view


def test_junit_has_one_case_per_rule_and_host_and_counts_failures(tmp_path: Path) -> None:
    report = evaluate(pack_rules(), variant_fleet())
    path = tmp_path / "junit.xml"
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)
    root = ET.parse(path).getroot()
    cases = root.findall("testsuite/testcase")
    assert len(cases) == len(report.results) * len(report.hosts)
    failed = [(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None]
    assert {(cls.removeprefix("fleet.check."), host) for cls, host in failed} == failures(report)
    assert int(root.get("failures", "-1")) == len(failed) == 5
    assert int(root.get("tests", "-1")) == len(cases)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    counts = report.counts()  # unknown, skipped (the live rules: no live probe there) and n/a
    assert int(root.get("skipped", "-1")) == skipped
    assert skipped == counts["n/a"] + counts.get("skipped", 0) + counts.get("unknown", 0)
    arch = next(
        c for c in cases if c.get("name") == "sm120" and "arch" in (c.get("classname") or "")
    )
    failure = arch.find("failure")
    assert failure is not None
    assert failure.get("type") == "error"
    assert "fix: torch 2.7.0+cu126 has no kernels" in (failure.text or "")


def test_terminal_view_shows_failing_hosts_observed_values_and_fixes() -> None:
    report = evaluate(pack_rules(), variant_fleet())
    buffer = io.StringIO()
    render_report(Console(file=buffer, width=200, no_color=True), report, "title")
    text = buffer.getvalue()
    assert "✗ fail torch-arch-supported" in text
    assert "sm120: observed 12.0" in text
    assert "fix: NCCL_P2P_DISABLE=1 on an NVLink host" in text
    assert "✓ pass same-torch" in text
    assert "✗ check failed: p2p-off,slow,sm120 fail 5 error rule(s); 5 error failure(s) — " in text


def test_same_failures_on_many_hosts_print_once() -> None:
    hosts = {f"gpu-{i:02d}": nccl_p2p_disabled(real_host()) for i in range(1, 6)}
    report = evaluate(pack_rules(), make_run(**hosts))
    buffer = io.StringIO()
    render_report(Console(file=buffer, width=200, no_color=True), report)
    assert buffer.getvalue().count("fix: NCCL_P2P_DISABLE=1") == 1
    assert "gpu-[01-05]: observed 1" in buffer.getvalue()


def test_check_document_is_json() -> None:
    document = evaluate(pack_rules(), variant_fleet()).to_dict()
    assert document["schema"] == "fleet.check/3"
    assert document["passed"] is False
    assert document["summary"]["failed_error"] == 5
    json.dumps(document)


def test_allreduce_summary_and_value_format() -> None:
    rows = data(real_host(), "allreduce")["results"]
    at = {(r["mode"], r["bytes"]): r for r in rows}
    summary = allreduce_summary(data(real_host(), "allreduce"))
    assert summary == {
        "small_bytes": 8,
        "small_latency_us": {m: at[(m, 8)]["latency_us"] for m in ("eager", "graph")},
        "large_bytes": 268435456,
        "large_busbw_gbps": max(at[(m, 268435456)]["busbw_gbps"] for m in ("eager", "graph")),
    }
    assert allreduce_summary({"results": []}) is None
    assert [format_value(v) for v in (None, True, 1.23456, [], ["a", 1])] == [
        "(not reported)",
        "true",
        "1.235",
        "(none)",
        "a, 1",
    ]
