"""fleet/units/live/facts.py on plain data: the live probe's ranks joined across hosts into jobs.

The two-host fleets are built from the real 2-rank NCCL 2.28.9 RAS report
(tests/probes/golden/live/ras/h200x2_2rank_json), its ranks put on two hosts, with one thing
changed per test; the one-host runs are the real `fleet probe -p live,torch,nccl` documents from
the lent H200 (tests/probes/golden/live/h200x1/).
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

from fleet.models import Run
from fleet.units.live.facts import LIVE_SCHEMA, live_jobs
from tests.conftest import ROOT
from tests.probes.ras_replay import load_capture

GOLDEN = ROOT / "tests" / "probes" / "golden" / "live"
ADDRESSES = {"gpu-a": "192.0.2.2", "gpu-b": "192.0.2.3"}
BUILD = "9fcf74d93a8c3605bf7718f594d0a24366e38536"  # the wheel's libnccl on the H200
LIBRARY = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"


def two_rank_view() -> dict[str, Any]:
    """The real report's communicator as the probe gives it (parsed), rank 1 moved to gpu-b."""
    from tests.probes.handrun import load_probe

    load_probe("live")  # its helpers, importable by name as on a host
    report = load_capture(GOLDEN / "ras" / "h200x2_2rank_json" / "exchange.txt").report
    (comm,) = sys.modules["_ras_reports"].parse_json_report(report)["communicators"]
    comm["ranks"][1]["host"] = ADDRESSES["gpu-b"]
    return dict(comm)


def nccl_process(
    pid: int, build: str = BUILD, version: str = "2.28.9", state: str = "S"
) -> dict[str, Any]:
    library = {"path": LIBRARY, "build_id": build, "version": version, "size": 217995896}
    return {
        "pid": pid,
        "ns_pid": None,
        "state": state,
        "cmdline": f"python3 train.py --rank-pid {pid}",
        "libraries": {"nccl": [library], "cudart": [], "cuda": []},
        "ras_listener": "127.0.0.1:28028",
        "nccl_threads": [],
        "gpus": [{"uuid": f"GPU-{pid}", "used_memory_mib": 1188}],
        "ranks": [],
    }


def host_data(
    name: str, processes: list[dict[str, Any]], views: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "processes": processes,
        "unreadable": {"count": 0, "by_user": {}, "nccl_processes": [], "hidepid": False},
        "communicators": views,
        "local_addresses": ["127.0.0.1", ADDRESSES[name], "::1"],
        "problems": {
            "missing_ranks": [],
            "async_errors": [],
            "count_mismatches": [],
            "uncovered": [],
        },
    }


def fleet(**hosts: dict[str, Any] | None) -> Run:
    """A run whose hosts have the given live data (None: the live probe was not run there)."""
    document: dict[str, Any] = {
        "fleet_version": "test",
        "started": "2026-12-01T00:00:00Z",
        "finished": "2026-12-01T00:00:01Z",
        "bundle_sha256": "0" * 64,
        "probes": ["live"],
        "hosts": {},
    }
    for name, data in hosts.items():
        probes = (
            {}
            if data is None
            else {"live": {"status": "ok", "ok": True, "data": data, "error": None}}
        )
        document["hosts"][name] = {
            "status": "ok",
            "address": ADDRESSES.get(name, name),
            "probes": probes,
        }
    return Run.from_dict(document)


def healthy_pair(
    view: dict[str, Any] | None = None, b_process: dict[str, Any] | None = None
) -> Run:
    view = view or two_rank_view()
    return fleet(
        **{
            "gpu-a": host_data("gpu-a", [nccl_process(727)], [copy.deepcopy(view)]),
            "gpu-b": host_data("gpu-b", [b_process or nccl_process(728)], [copy.deepcopy(view)]),
        }
    )


def test_a_healthy_two_host_job() -> None:
    report = live_jobs(healthy_pair())
    (job,) = report.jobs
    assert job.comm == "0x44d8c595d392cba8"
    assert job.size == 2
    assert job.hosts == ("gpu-a", "gpu-b")
    assert job.reported_by == ("gpu-a", "gpu-b")
    assert [(r.rank, r.host, r.pid, r.cuda_dev, r.nccl_version, r.library) for r in job.ranks] == [
        (0, "gpu-a", 727, 0, "2.28.9", LIBRARY),
        (1, "gpu-b", 728, 1, "2.28.9", LIBRARY),
    ]
    assert job.ranks[0].gpus == ("GPU-727",)
    assert job.ranks[1].status == "RUNNING"
    assert job.nccl_versions == ("2.28.9",)
    assert job.libraries == (BUILD,)
    assert job.findings == ()
    assert job.blame is None
    assert report.healthy is True
    assert not report.unjoined
    assert not report.not_judged


def test_ranks_that_mapped_different_builds_are_a_finding() -> None:
    other = nccl_process(728, build="1111111111111111111111111111111111111111", version="2.30.4")
    (job,) = live_jobs(healthy_pair(b_process=other)).jobs
    assert job.nccl_versions == ("2.28.9", "2.30.4")
    (finding,) = job.findings
    assert finding.startswith("ranks mapped different libnccl builds: ")
    assert "rank 0 on gpu-a" in finding
    assert "rank 1 on gpu-b" in finding
    assert job.blame is not None
    assert job.blame.reason.endswith("the least used libnccl build")


def test_a_stopped_rank_is_named_with_its_host_and_blamed() -> None:
    view = two_rank_view()
    gone = view["ranks"].pop(1)
    view["missing_ranks"] = [
        {**{k: gone[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}}
        | {"status": {"unresponsive": True, "considered_dead": False}}
    ]
    report = live_jobs(healthy_pair(view, b_process=nccl_process(728, state="T")))
    (job,) = report.jobs
    rank = job.ranks[1]
    assert (rank.host, rank.pid, rank.missing, rank.state) == ("gpu-b", 728, "unresponsive", "T")
    assert job.findings == (
        "rank 1 (pid 728 on gpu-b, GPU 1): its process is stopped",
        "rank 1 (pid 728 on gpu-b, GPU 1): missing, unresponsive",
    )
    assert job.blame is not None
    assert (job.blame.host, job.blame.rank) == ("gpu-b", 1)
    assert report.healthy is False


def test_a_dead_rank_on_a_host_not_probed_is_named_by_inventory_address() -> None:
    view = two_rank_view()
    gone = view["ranks"].pop(1)
    view["missing_ranks"] = [
        {**{k: gone[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}}
        | {"status": {"unresponsive": True, "considered_dead": True}}
    ]
    report = live_jobs(
        fleet(**{"gpu-a": host_data("gpu-a", [nccl_process(727)], [view]), "gpu-b": None})
    )
    (job,) = report.jobs
    assert job.ranks[1].host == "gpu-b"
    assert job.ranks[1].missing == "considered dead"
    assert job.blame is not None
    assert job.blame.reason == "rank 1 (pid 728 on gpu-b, GPU 1): missing, considered dead"
    assert report.not_judged == {"gpu-b": ("probe live was not run",)}


def test_async_error_is_blamed_before_a_lagging_count() -> None:
    view = two_rank_view()
    view["ranks"][0]["status"]["async_error"] = 6
    view["ranks"][1]["collective_counts"]["AllReduce"] = 1140
    (job,) = live_jobs(healthy_pair(view)).jobs
    assert "rank 0 (pid 727 on gpu-a, GPU 0): asynchronous error 6" in job.findings
    assert (
        "AllReduce counts differ: rank 1 (pid 728 on gpu-b, GPU 1) at 1140; the others at 1145"
        in job.findings
    )
    assert job.blame is not None
    assert job.blame.host == "gpu-a"


def test_the_rank_furthest_behind_is_blamed() -> None:
    view = two_rank_view()
    view["ranks"][1]["collective_counts"]["AllReduce"] = 1140
    (job,) = live_jobs(healthy_pair(view)).jobs
    assert job.blame is not None
    assert (
        job.blame.reason
        == "rank 1 (pid 728 on gpu-b, GPU 1): furthest behind in AllReduce (1140 of 1145)"
    )


def test_a_rank_in_no_report_is_missing() -> None:
    view = two_rank_view()
    view["ranks"].pop(1)  # neither present nor listed missing
    (job,) = live_jobs(fleet(**{"gpu-a": host_data("gpu-a", [nccl_process(727)], [view])})).jobs
    assert job.ranks[1].missing == "in no report"
    assert job.ranks[1].host is None


def test_an_address_two_hosts_claim_stays_an_address() -> None:
    view = two_rank_view()
    view["ranks"][1]["host"] = "10.0.0.9"
    a = host_data("gpu-a", [nccl_process(727)], [view])
    b = host_data("gpu-b", [nccl_process(728)], [])
    a["local_addresses"].append("10.0.0.9")
    b["local_addresses"].append("10.0.0.9")
    c = host_data("gpu-a", [], [])
    c["local_addresses"] = ["10.0.0.9"]
    (job,) = live_jobs(fleet(**{"gpu-a": a, "gpu-b": b})).jobs
    assert job.ranks[1].host == "gpu-a"  # the reporter's own address wins
    view["ranks"][1]["host"] = "10.0.0.7"
    b["local_addresses"].append("10.0.0.7")
    c["local_addresses"] = ["10.0.0.7"]
    (job,) = live_jobs(
        fleet(**{"gpu-a": host_data("gpu-a", [], [view]), "gpu-b": b, "gpu-c": c})
    ).jobs
    assert job.ranks[1].host == "10.0.0.7"


def test_the_real_h200_run_is_one_healthy_job() -> None:
    run = Run.from_dict(json.loads((GOLDEN / "h200x1" / "fleet_run_running.json").read_text()))
    report = live_jobs(run)
    (job,) = report.jobs
    (rank,) = job.ranks
    assert (rank.host, rank.pid, rank.nccl_version, rank.library) == (
        "local",
        468,
        "2.28.9",
        LIBRARY,
    )
    assert rank.build_id == BUILD
    assert rank.gpus == ("GPU-779eb2cf-8007-cf8f-fac9-54618c182bb3",)
    assert job.findings == ()
    assert report.healthy is True


def test_the_real_h200_stopped_job_is_a_finding_outside_any_job() -> None:
    document = json.loads((GOLDEN / "h200x1" / "fleet_run_stopped.json").read_text())
    data = document["hosts"]["local"]["probes"]["live"]["data"]
    # Recorded before the probe read listening sockets: the job listened on 127.0.0.1:28028
    # (its RAS accepted the probe's connection), as the current probe reports it.
    data["processes"][0]["ras_listener"] = "127.0.0.1:28028"
    report = live_jobs(Run.from_dict(document))
    assert report.jobs == ()
    (line,) = report.unjoined["local"]
    assert line.startswith(
        "pid 468 on GPU-779eb2cf (/opt/torch/.venv/bin/python3 -c import os, sys"
    )
    assert line.endswith(": stopped, in no RAS answer")
    assert report.findings == (f"local: {line}",)
    assert report.healthy is False


def test_not_judged_hosts_make_the_report_unknown() -> None:
    a = host_data("gpu-a", [nccl_process(727)], [])
    a["problems"]["uncovered"] = ["RAS at localhost:28028: connected, but no answer"]
    report = live_jobs(fleet(**{"gpu-a": a}))
    assert report.not_judged == {"gpu-a": ("RAS at localhost:28028: connected, but no answer",)}
    assert report.unjoined == {"gpu-a": ("pid 727 on GPU-727 (python3 train.py --rank-pid 727)",)}
    assert report.healthy is None


@pytest.mark.parametrize("status", ["failed", "timeout"])
def test_a_probe_that_did_not_succeed_is_not_judged(status: str) -> None:
    run = fleet(**{"gpu-a": host_data("gpu-a", [], [])})
    document = run.to_dict()
    document["hosts"]["gpu-a"]["probes"]["live"].update(status=status, ok=False, error="boom")
    report = live_jobs(Run.from_dict(document))
    assert report.not_judged == {"gpu-a": (f"probe live {status}: boom",)}


def test_as_dict_is_json() -> None:
    document = live_jobs(healthy_pair()).as_dict()
    assert document["schema"] == LIVE_SCHEMA
    assert document["healthy"] is True
    assert json.loads(json.dumps(document))["jobs"][0]["ranks"][1]["host"] == "gpu-b"


# ------------------------------------------------------------------------------- as findings


def test_findings_name_a_stopped_rank_on_its_host_once() -> None:
    from fleet.units.live.findings import findings as jobs_findings

    view = two_rank_view()
    gone = view["ranks"].pop(1)
    view["missing_ranks"] = [
        {k: gone[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}
        | {"status": {"unresponsive": True, "considered_dead": False}}
    ]
    (finding,) = jobs_findings(healthy_pair(view, b_process=nccl_process(728, state="T")))
    assert (finding.severity, finding.action, finding.hosts) == ("error", "restart-app", ("gpu-b",))
    assert finding.where == "rank 1 pid 728 GPU 1"
    assert finding.what == (
        "NCCL job 0x44d8c595d392cba8: rank 1 on gpu-b: its process is stopped; missing, unresponsive"
    )


def test_findings_of_mixed_builds_and_a_shared_ras_port() -> None:
    from fleet.units.live.findings import findings as jobs_findings

    other = nccl_process(728, build="1111111111111111111111111111111111111111", version="2.30.4")
    run = healthy_pair(b_process=other)
    document = run.to_dict()
    shared = "RAS at 127.0.0.1:28028 is shared by 2 jobs (pids 727; 900)"
    document["hosts"]["gpu-a"]["probes"]["live"]["data"]["problems"]["shared_ras_ports"] = [shared]
    builds, port = jobs_findings(Run.from_dict(document))
    assert (builds.severity, builds.action, builds.hosts) == (
        "error",
        "fix-config",
        ("gpu-a", "gpu-b"),
    )
    assert "2 libnccl builds (NCCL 2.28.9, 2.30.4)" in builds.what
    assert (port.severity, port.hosts, port.what) == ("warning", ("gpu-a",), shared)


def test_no_findings_without_the_live_probe() -> None:
    from fleet.units.live.findings import findings as jobs_findings

    assert jobs_findings(fleet(**{"gpu-a": None})) == []
    assert jobs_findings(healthy_pair()) == []


def test_the_html_section_lists_every_rank_and_what_is_wrong() -> None:
    from fleet.units.live.html import jobs_section

    view = two_rank_view()
    view["ranks"][1]["collective_counts"]["AllReduce"] = 1140
    markup = jobs_section(live_jobs(healthy_pair(view)))
    assert markup.count("<tr data-key=") == 2
    assert "gpu-b: rank 1 of 0x44d8c595d392cba8: behind in AllReduce: 1140 of 1145" in markup
