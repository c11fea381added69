"""The inference pack's live-* rules on plain data: a host that could not be read is unknown or
skipped, never a pass; an idle host is n/a."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleet.checks import evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import Run
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "probes" / "golden" / "live" / "h200x1"
RULES = ("live-no-missing-ranks", "live-no-async-errors", "live-collective-counts-agree")


def recorded_running() -> dict[str, Any]:
    """The real `fleet probe -p live,torch,nccl` run on the H200 with a 1-rank job running."""
    return dict(json.loads((GOLDEN / "fleet_run_running.json").read_text()))


def live_of(document: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = document["hosts"]["local"]["probes"]["live"]["data"]
    return data  # the document's own: changes to it change the document


def verdicts(document: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    rules = [
        r
        for r in load_rules(pack_path("inference"), available_probes())
        if r.id.startswith("live-")
    ]
    report = evaluate(rules, Run.from_dict(document))
    return {r.rule.id: (r.verdicts[0].status, r.verdicts[0].observed) for r in report.results}


def test_the_real_running_job_passes() -> None:
    found = verdicts(recorded_running())
    assert {rule: status for rule, (status, _) in found.items()} == {
        "live-no-missing-ranks": "pass",
        "live-no-async-errors": "pass",
        "live-collective-counts-agree": "pass",
        "live-nccl-matches-torch": "pass",
    }


def test_an_idle_host_is_not_applicable() -> None:
    document = recorded_running()
    live_of(document).update(processes=[], communicators=[])
    assert {status for status, _ in verdicts(document).values()} == {"n/a"}


def test_problems_not_judged_are_unknown_never_a_pass() -> None:
    document = recorded_running()
    uncovered = ["RAS at localhost:28028: connected, but no answer to CLIENT PROTOCOL within 3 s"]
    live_of(document)["problems"] = {
        "missing_ranks": None,
        "async_errors": None,
        "count_mismatches": None,
        "uncovered": uncovered,
    }
    found = verdicts(document)
    for rule in RULES:
        assert found[rule] == ("unknown", uncovered)


@pytest.mark.parametrize(
    ("field", "rule"),
    [
        ("missing_ranks", "live-no-missing-ranks"),
        ("async_errors", "live-no-async-errors"),
        ("count_mismatches", "live-collective-counts-agree"),
    ],
)
def test_a_problem_fails_its_rule(field: str, rule: str) -> None:
    document = recorded_running()
    line = "pid 468 (python3 -c ...) is stopped: its ranks and RAS are frozen"
    live_of(document)["problems"][field] = [line]
    assert verdicts(document)[rule] == ("fail", [line])


def test_a_stopped_rank_fails_even_where_the_rest_is_unknown() -> None:
    document = recorded_running()
    line = "pid 468 (python3 -c ...) is stopped: its ranks and RAS are frozen"
    live_of(document)["problems"] = {
        "missing_ranks": [line],
        "async_errors": None,
        "count_mismatches": None,
        "uncovered": ["pid 468 (python3 -c ...): no RAS answer names it"],
    }
    found = verdicts(document)
    assert found["live-no-missing-ranks"][0] == "fail"
    assert found["live-no-async-errors"][0] == "unknown"


def test_a_process_that_mapped_another_nccl_than_torch_reports_warns() -> None:
    document = recorded_running()
    live_of(document)["processes"][0]["libraries"]["nccl"][0]["version"] = "2.30.4"
    assert verdicts(document)["live-nccl-matches-torch"] == ("fail", ["2.30.4"])


def test_mapped_nccl_against_torch_is_unknown_without_either_version() -> None:
    document = recorded_running()
    live_of(document)["processes"][0]["libraries"]["nccl"][0]["version"] = None
    assert verdicts(document)["live-nccl-matches-torch"][0] == "unknown"
    document = recorded_running()
    document["hosts"]["local"]["probes"]["torch"]["data"]["nccl_version"] = None
    assert verdicts(document)["live-nccl-matches-torch"][0] == "unknown"


def test_a_live_probe_that_failed_skips_its_rules() -> None:
    document = recorded_running()
    document["hosts"]["local"]["probes"]["live"].update(status="failed", ok=False, error="boom")
    assert {status for status, _ in verdicts(document).values()} == {"skipped"}


def probed_against(served: Any) -> dict[str, Any]:
    """The live probe's data, its collect() run here with a RAS replay as one more endpoint."""
    from tests.probes.handrun import load_probe
    from tests.probes.ras_replay import replay_server

    fast = {"ras_read_timeout_s": 0.5, "ras_connect_timeout_s": 0.5, "ras_collective_timeout_s": 1}
    with replay_server(served) as server:
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        result = load_probe("live").collect({**fast, "ras_endpoints": [endpoint]})
    data: dict[str, Any] = result["data"]
    return data


def test_a_report_garbage_in_both_formats_makes_the_live_rules_unknown_never_pass() -> None:
    """No NCCL process of this user is seen here, yet a RAS server answered the handshake and then
    nothing readable, in JSON or in text: every live rule is unknown, naming why."""
    from tests.probes.ras_replay import Capture, load_capture

    handshake = load_capture(GOLDEN.parent / "ras" / "nccl2289_missing_rank_json" / "exchange.txt")
    document = recorded_running()
    live_of(document).clear()
    live_of(document).update(probed_against(Capture(dict(handshake.replies), "{ garbage\n")))
    assert live_of(document)["processes"] == []
    found = verdicts(document)
    for rule in RULES:
        status, observed = found[rule]
        assert status == "unknown"
        (why,) = observed
        assert "no readable report (JSON: Expecting property name" in why
        assert "text: not NCCL's text report" in why


def test_the_replayed_2289_missing_rank_fails_its_rule() -> None:
    from tests.probes.ras_replay import load_capture

    served = load_capture(GOLDEN.parent / "ras" / "nccl2289_missing_rank_json" / "exchange.txt")
    document = recorded_running()
    live_of(document).update(probed_against(served))
    assert verdicts(document)["live-no-missing-ranks"] == (
        "fail",
        ["comm 0x44d8c595d392cba8 rank 1: pid 728 on 192.0.2.2, GPU 1 (unresponsive)"],
    )


def test_a_host_whose_ras_was_unreadable_is_unknown_even_with_no_process_seen() -> None:
    document = recorded_running()
    why = ["RAS at localhost:28028: no readable report (JSON: …; text: …)"]
    live_of(document).update(
        processes=[],
        communicators=[],
        ras_readable=False,
        ras_error=why[0],
        problems={"missing_ranks": None, "async_errors": None, "count_mismatches": None},
    )
    live_of(document)["problems"]["uncovered"] = why
    assert {rule: verdicts(document)[rule] for rule in RULES} == {
        rule: ("unknown", why) for rule in RULES
    }
