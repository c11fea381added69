"""NCCL RAS as it goes wrong in the field (issue 39 part 2): NCCL 2.28.7-2.28.9's JSON without the
comma after a missing rank's `"nvml_dev": N`, a JSON report that does not parse (asked again in
text), a report unreadable in both formats (unknown, never clean), two jobs on one RAS port, and
NCCL versions that differ within one job. Replayed from the captures under golden/live/ras/."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.probes.handrun import load_probe
from tests.probes.ras_replay import Capture, load_capture, replay_server

live = load_probe("live")
reports, job = sys.modules["_ras_reports"], sys.modules["_job_problems"]
RAS = Path(__file__).parent / "golden" / "live" / "ras"
FAST = {"ras_read_timeout_s": 0.5, "ras_connect_timeout_s": 0.5, "ras_collective_timeout_s": 1}
# Rank 1 of the 2-rank H200 job, as both formats of the 2.28.9 report name it.
MISSING_FROM_JSON = "comm 0x44d8c595d392cba8 rank 1: pid 728 on 192.0.2.2, GPU 1 (unresponsive)"
MISSING_FROM_TEXT = "comm 0x44d8c595d392cba8 rank 1: pid 728 on 192.0.2.2, GPU 1 (no RAS answer)"


def capture(case: str) -> Capture:
    return load_capture(RAS / case / "exchange.txt")


def probe_against(served: Capture) -> dict[str, Any]:
    """The whole probe, by its collect(), with the replay as one more RAS endpoint."""
    with replay_server(served) as server:
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        result = live.collect({**FAST, "ras_endpoints": [endpoint], "transcripts": True})
    assert result["ok"]
    data: dict[str, Any] = result["data"]
    data["replayed"] = next(o for o in data["ras"] if o["endpoint"] == endpoint)
    return data


def garbled(report: str) -> str:
    """The report cut in the middle, as a server that lost its output mid-way would close it."""
    return report[: len(report) // 2]


# ---------------------------------------------------------------- the 2.28.7-2.28.9 comma


def test_the_2289_report_lacks_the_comma_and_is_repaired_exactly_there() -> None:
    raw = capture("nccl2289_missing_rank_json").report
    with pytest.raises(json.JSONDecodeError, match="Expecting ',' delimiter"):
        json.loads(raw)
    repaired, count = reports.repair_missing_rank_commas(raw)
    assert count == 1
    assert json.loads(repaired)  # that comma was the only defect
    assert repaired.replace('"nvml_dev": 1,\n', '"nvml_dev": 1\n', 1) == raw  # nothing else moved


@pytest.mark.parametrize("case", ["h200x1_1rank_json", "h200x2_2rank_json", "h200x1_two_jobs_json"])
def test_well_formed_reports_are_left_alone(case: str) -> None:
    raw = capture(case).report
    assert reports.repair_missing_rank_commas(raw) == (raw, 0)
    assert "repaired" not in reports.parse_json_report(raw)


def test_the_repair_is_no_general_json_fixer() -> None:
    """The same comma left out of a rank's own entry (not a missing rank's) is not NCCL's known
    defect: it is not repaired and the report does not parse."""
    raw = capture("h200x2_2rank_json").report.replace('"nvml_dev": 1,', '"nvml_dev": 1', 1)
    assert reports.repair_missing_rank_commas(raw) == (raw, 0)
    with pytest.raises(ValueError, match="Expecting ',' delimiter"):
        reports.parse_json_report(raw)


def test_a_replayed_2289_exchange_names_the_missing_rank() -> None:
    data = probe_against(capture("nccl2289_missing_rank_json"))
    (attempt,) = data["replayed"]["attempts"]
    assert (attempt["answered"], attempt["format"], attempt["error"]) == (True, "json", None)
    assert attempt["report"]["repaired"].startswith("NCCL 2.28.7-2.28.9 missing_ranks: 1 ")
    assert data["problems"]["missing_ranks"] == [MISSING_FROM_JSON]
    assert (data["ras_readable"], data["ras_error"]) == (True, None)


# ---------------------------------------------------------------- asked again in text


def test_json_that_still_does_not_parse_is_asked_again_in_text() -> None:
    served = Capture(
        dict(capture("nccl2289_missing_rank_json").replies),
        garbled(capture("nccl2289_missing_rank_json").report),
        capture("nccl2289_missing_rank_text").report,
    )
    data = probe_against(served)
    first, again = data["replayed"]["attempts"]
    assert (first["format"], first["stage"], first["answered"]) == ("json", "parse JSON", False)
    assert (again["format"], again["answered"], again["error"]) == ("text", True, None)
    assert again["retry"] == "text, the JSON report did not parse"
    json_exchange, text_exchange = data["replayed"]["transcripts"]
    assert "> SET FORMAT json\n" in json_exchange
    assert "SET FORMAT" not in text_exchange  # a new connection, text from its start
    assert data["problems"]["missing_ranks"] == [MISSING_FROM_TEXT]
    assert data["problems"]["uncovered"] == []
    assert data["ras_readable"] is True


def test_the_text_report_alone_names_the_missing_rank() -> None:
    data = probe_against(capture("nccl2289_missing_rank_text"))
    assert data["problems"]["missing_ranks"] == [MISSING_FROM_TEXT]


# ---------------------------------------------------------------- unreadable: unknown


def test_garbage_in_both_formats_leaves_every_live_problem_unknown() -> None:
    served = Capture(dict(capture("nccl2289_missing_rank_json").replies), "{ garbage\n")
    data = probe_against(served)
    json_try, text_try = data["replayed"]["attempts"]
    assert json_try["error"].startswith("Expecting property name")
    assert text_try["error"] == "not NCCL's text report: '{ garbage'"
    assert data["ras_readable"] is False
    assert "no readable report (JSON: Expecting property name" in data["ras_error"]
    found = data["problems"]
    assert (found["missing_ranks"], found["async_errors"], found["count_mismatches"]) == (
        None,
        None,
        None,
    )
    (why,) = found["uncovered"]
    assert why.startswith(f"RAS at {data['replayed']['endpoint']}: no readable report (JSON: ")


def test_a_ras_server_that_reports_nothing_is_unreadable_and_none_is_no_answer() -> None:
    data = probe_against(Capture())  # the handshake, then an empty report
    assert data["ras_readable"] is False  # it spoke RAS, then sent nothing readable
    assert data["replayed"]["error"] == "not NCCL's text report: ''"
    assert live.collect({**FAST, "ras": False})["data"]["ras_readable"] is None


# ---------------------------------------------------------------- jobs, ports and versions


def process(pid: int, **changes: Any) -> dict[str, Any]:
    base = {
        "pid": pid,
        "ras_endpoint": "localhost:28028",
        "nccl_version": "2.28.9",
        "env": {},
        "ranks": [],
    }
    return {**base, **changes}


def ranks(comm: str, rank: int = 0) -> list[dict[str, Any]]:
    return [{"comm": comm, "rank": rank, "cuda_dev": 0}]


def test_two_jobs_on_one_ras_port_are_a_problem() -> None:
    processes = [
        process(468, ranks=ranks("0x228b0cacd66f2b5f")),
        process(581, ranks=ranks("0x9e3779b97f4a7c15")),
        process(700, ranks=ranks("0x1111"), ras_endpoint="localhost:28100"),
    ]
    jobs = job.jobs_of(processes)
    assert [[p["pid"] for p in members] for members in jobs] == [[468], [581], [700]]
    assert job.shared_ras_ports(processes, jobs) == [
        "RAS at localhost:28028 is shared by 2 jobs (pids 468; 581): a RAS client reaches one "
        "of them per connection; give each job its own NCCL_RAS_ADDR port"
    ]


def test_ranks_of_one_job_share_their_port_rightly() -> None:
    launcher = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    processes = [
        process(727, ranks=ranks("0x44d8c595d392cba8", 0)),
        process(728, ranks=ranks("0x44d8c595d392cba8", 1)),
        process(729, env=launcher),  # no ranks named (RAS silent): its launcher says its job
        process(730, env=launcher, ranks=ranks("0x44d8c595d392cba8", 2)),
        process(800),  # neither: its job is not known, so it is not counted
    ]
    jobs = job.jobs_of(processes)
    assert [[p["pid"] for p in members] for members in jobs] == [[727, 728, 729, 730]]
    assert job.shared_ras_ports(processes, jobs) == []


def test_nccl_versions_that_differ_within_one_job_are_a_problem() -> None:
    processes = [
        process(727, ranks=ranks("0x44d8c595d392cba8", 0)),
        process(728, ranks=ranks("0x44d8c595d392cba8", 1), nccl_version="2.27.7"),
        process(900, ranks=ranks("0x2222"), nccl_version="2.26.2"),  # another job: no matter
    ]
    assert job.nccl_versions_differ(job.jobs_of(processes)) == [
        "job of pids 727, 728: libnccl 2.28.9 (pid 727), 2.27.7 (pid 728); RAS peers of "
        "different NCCL versions refuse each other"
    ]
