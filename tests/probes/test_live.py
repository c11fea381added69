"""The live probe: /proc parsing on captured files, the NCCL RAS client against a server that
replays captured NCCL output (tests/probes/ras_replay.py), library identity on built ELF files,
what is judged and what is left unknown, and the probe run by hand beside stand-in processes."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REMOTE_PYTHON
from tests.probes.elf_builder import build_elf
from tests.probes.handrun import BY_HAND, REPO, load_probe, run_by_hand
from tests.probes.ras_replay import Capture, load_capture, replay_server

live = load_probe("live")
# Its helpers (probes/_*.py), importable by name once the probe is loaded, as on a host.
procfs, elf, reports, client, job = (
    sys.modules[name]
    for name in ("_procfs", "_elf", "_ras_reports", "_ras_client", "_job_problems")
)
GOLDEN = Path(__file__).parent / "golden" / "live"
PROC_CASES = sorted(p.name for p in (GOLDEN / "proc").iterdir() if p.is_dir())
RAS_CASES = sorted(p.name for p in (GOLDEN / "ras").iterdir() if p.is_dir())
CANARY = "hf_CANARYlive0123456789abcdefghij"
FAST = {"connect_timeout_s": 1.0, "read_timeout_s": 0.5, "collective_timeout_s": 1, "attempts": 4}
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux /proc")


def capture(case: str) -> Capture:
    return load_capture(GOLDEN / "ras" / case / "exchange.txt")


def settings(**changes: Any) -> dict[str, float]:
    return {**live._options({}), **FAST, **changes}


def ask(server: Any, **changes: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    transcript: list[tuple[str, str]] = []
    address = ("127.0.0.1", server.server_address[1])
    return client.ras_query(socket.AF_INET, address, settings(**changes), transcript), transcript


# ---------------------------------------------------------------- golden /proc and RAS captures


@pytest.mark.parametrize("case", PROC_CASES)
def test_proc_golden(case: str) -> None:
    folder = GOLDEN / "proc" / case
    expected = json.loads((folder / "expected.json").read_text())
    environ = procfs.parse_environ((folder / "environ").read_bytes())
    args = procfs.parse_cmdline((folder / "cmdline").read_bytes())
    assert procfs.parse_maps((folder / "maps").read_text()) == expected["libraries"]
    assert procfs.allowed_environment(environ) == expected["environment"]
    assert procfs.mask_cmdline(args, procfs.secret_values(environ)) == expected["cmdline"]
    assert procfs.parse_status((folder / "status").read_text()) == expected["status"]
    names = (folder / "thread_names.txt").read_text().splitlines()
    assert procfs.thread_kinds(names) == expected["thread_kinds"]
    assert (folder / "SOURCE.md").is_file()


def test_proc_golden_says_what_matters() -> None:
    """Read against what the H200 showed: the wheel's libnccl, torch's threads, the env label."""
    torch_job = json.loads((GOLDEN / "proc" / "h200x1_torch_job" / "expected.json").read_text())
    (nccl,) = torch_job["libraries"]["nccl"]
    assert nccl["path"].endswith("site-packages/nvidia/nccl/lib/libnccl.so.2")
    assert torch_job["thread_kinds"] == ["pt_nccl_heartbt", "pt_nccl_watchdg"]
    assert torch_job["environment"]["NCCL_VERSION"] == "2.28.3-1"  # a label; 2.28.9 is mapped
    standin = json.loads((GOLDEN / "proc" / "local_standin" / "expected.json").read_text())
    assert CANARY not in json.dumps(standin)
    assert "plainsecretvalue123" not in json.dumps(standin)
    assert "HF_TOKEN" not in standin["environment"]
    assert standin["cmdline"].endswith("--api-key *** --hf-token=***")


@pytest.mark.parametrize("case", RAS_CASES)
def test_ras_golden(case: str) -> None:
    folder = GOLDEN / "ras" / case
    expected = json.loads((folder / "expected.json").read_text())
    recorded = capture(case)
    assert recorded.replies == expected["replies"]
    if expected["report"] is None:
        assert not recorded.report.strip()
    elif recorded.is_json:
        assert reports.parse_json_report(recorded.report) == expected["report"]
    else:
        assert reports.parse_text_report(recorded.report) == expected["report"]
    assert (folder / "SOURCE.md").is_file()


def test_two_rank_json_report() -> None:
    report = reports.parse_json_report(capture("h200x2_2rank_json").report)
    (comm,) = report["communicators"]
    assert report["nccl_version"] == "2.28.9"
    assert comm["hash"] == "0x44d8c595d392cba8"
    assert comm["status"] == "RUNNING"
    assert [(r["rank"], r["pid"], r["cuda_dev"]) for r in comm["ranks"]] == [
        (0, 727, 0),
        (1, 728, 1),
    ]
    assert not comm["counts_differ"]
    assert not comm["missing_ranks"]
    assert not comm["async_error_ranks"]


def test_two_rank_text_report() -> None:
    report = reports.parse_text_report(capture("h200x2_2rank_text").report)
    assert report["complete"]
    assert report["nccl_version"] == "2.28.9"
    assert report["job"] == {
        "nodes": 1,
        "processes_per_node": 2,
        "gpus_per_process": 1,
        "processes": 2,
        "gpus": 2,
    }
    assert report["groups"] == [
        {
            "group": 0,
            "comms": 1,
            "nodes_per_comm": 1,
            "ranks_per_node": 2,
            "ranks_per_comm": 2,
            "ranks_in_group": 2,
            "status": "RUNNING",
            "errors": "OK",
        }
    ]


# A text report with every kind of block, BUILT from the printf formats of NCCL 2.28.9's
# src/ras/client_support.cc (no 2-GPU machine was lent to capture one): rank 1 of a 4-rank job
# unresponsive, rank 3 with an asynchronous error, rank 2 behind in AllReduce.
BUILT_TEXT_REPORT = """NCCL version 2.28.9 compiled with CUDA 13.0
CUDA runtime version 13000, driver version 13000

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          2            1          4        4

Communicators... (2.004s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         2         4         3   RUNNING  INCOMPLETE,ERROR,MISMATCH

Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 728 on node 192.0.2.3 managing GPU 1

#0-0 (044d8c595d392cba) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 1 -- GPU 1 managed by process 728 on node 192.0.2.3

#0-0 (044d8c595d392cba) ERROR
  Asynchronous error on 1 rank
  Rank 3 reported Remote process error -- GPU 1 managed by process 730 on node 192.0.2.2

Warnings
========

TIMEOUT
  Encountered 1 communication timeout while gathering communicator data

#0-0 (044d8c595d392cba) MISMATCH
  Communicator ranks have different AllReduce operation counts
  2 ranks have launched up to operation 1145
  Rank 2 has launched up to operation 1144 -- GPU 0 managed by process 729 on node 192.0.2.2

"""


def test_text_report_blocks_name_ranks_and_processes() -> None:
    report = reports.parse_text_report(BUILT_TEXT_REPORT)
    assert report["collection_time_s"] == 2.004
    assert report["groups"][0]["errors"] == "INCOMPLETE,ERROR,MISMATCH"
    kinds = [(b["kind"], b["comm"]) for b in report["errors"] + report["warnings"]]
    assert kinds == [
        ("INCOMPLETE", None),
        ("INCOMPLETE", "0x44d8c595d392cba"),
        ("ERROR", "0x44d8c595d392cba"),
        ("TIMEOUT", None),
        ("MISMATCH", "0x44d8c595d392cba"),
    ]
    assert report["errors"][0]["processes"] == [{"pid": 728, "host": "192.0.2.3", "gpus": "1"}]
    error = report["errors"][2]["ranks"][0]
    assert (error["rank"], error["pid"], error["detail"]) == (
        3,
        730,
        "reported Remote process error",
    )
    found = job.problems([], [], [report], [])
    assert found["missing_ranks"] == [
        "job: pid 728 on 192.0.2.3 (no RAS answer)",
        "comm 0x44d8c595d392cba rank 1: pid 728 on 192.0.2.3, GPU 1 (no RAS answer)",
    ]
    assert found["async_errors"] == [
        "comm 0x44d8c595d392cba rank 3 reported Remote process error: pid 730 on 192.0.2.2, GPU 1"
    ]
    assert found["count_mismatches"] == [
        "comm 0x44d8c595d392cba: Communicator ranks have different AllReduce operation counts"
    ]


def test_partial_text_report_is_not_complete() -> None:
    cut = BUILT_TEXT_REPORT.split("Errors")[0]
    assert not reports.parse_text_report(cut)["complete"]


# ---------------------------------------------------------------- derived JSON: what goes wrong


def derived_json(change: Any) -> dict[str, Any]:
    """The real 2-rank report with one thing changed (`change` edits the parsed document)."""
    document = json.loads(capture("h200x2_2rank_json").report)
    change(document["communicators"][0])
    return reports.parse_json_report(json.dumps(document))


def test_counts_that_differ_name_the_ranks_behind() -> None:
    def behind(comm: dict[str, Any]) -> None:
        comm["ranks"][1]["collective_counts"]["AllReduce"] = 1140

    (comm,) = derived_json(behind)["communicators"]
    assert comm["counts_differ"]
    assert comm["count_ranges"] == {"AllReduce": [1140, 1145]}
    assert comm["lagging_ranks"] == [1]
    assert job.problems([], [comm], [], [])["count_mismatches"] == [
        "comm 0x44d8c595d392cba8 AllReduce: ranks at 1140..1145 (behind: rank 1)"
    ]


def test_async_error_and_missing_rank() -> None:
    def broken(comm: dict[str, Any]) -> None:
        comm["ranks"][0]["status"]["async_error"] = 6
        missing = comm["ranks"].pop(1)
        comm["missing_ranks"] = [
            {**{k: missing[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}}
            | {"status": {"unresponsive": True, "considered_dead": False}}
        ]

    (comm,) = derived_json(broken)["communicators"]
    assert comm["async_error_ranks"][0]["error"] == "remote error"
    found = job.problems([], [comm], [], [])
    assert found["missing_ranks"] == [
        "comm 0x44d8c595d392cba8 rank 1: pid 728 on 192.0.2.2, GPU 1 (unresponsive)"
    ]
    assert found["async_errors"] == [
        "comm 0x44d8c595d392cba8 rank 0: remote error (pid 727 on 192.0.2.2, GPU 0)"
    ]


def test_in_progress_is_not_an_error_and_statuses_combine() -> None:
    def mixed(comm: dict[str, Any]) -> None:
        comm["ranks"][0]["status"]["async_error"] = 7  # ncclInProgress
        comm["ranks"][1]["status"]["abort_flag"] = True

    (comm,) = derived_json(mixed)["communicators"]
    assert comm["async_error_ranks"] == []
    assert comm["status"] == "ABORT+RUNNING"


def test_not_nccl_json_is_refused() -> None:
    with pytest.raises(ValueError, match="communicators"):
        reports.parse_json_report('{"hello": 1}')


# ---------------------------------------------------------------- what is judged, what is not


def process(pid: int = 468, **changes: Any) -> dict[str, Any]:
    base = {
        "pid": pid,
        "ns_pid": None,
        "state": "S",
        "cmdline": "python3 job.py",
        "ras_endpoint": "localhost:28028",
        "ras_listener": "127.0.0.1:28028",
        "listening": ["127.0.0.1:28028"],
        "nccl_threads": [],
        "gpus": [],
        "ranks": [],
    }
    return {**base, **changes}


def outcome(report: dict[str, Any] | None, listening: bool = True) -> dict[str, Any]:
    attempt = {"answered": report is not None, "listening": listening, "report": report}
    error = None if report else "connected, but no answer to CLIENT PROTOCOL within 3 s"
    return {
        "endpoint": "localhost:28028",
        "attempts": [attempt],
        "answered": bool(report),
        "error": error,
    }


def test_a_process_named_by_ras_is_judged() -> None:
    report = reports.parse_json_report(capture("h200x1_1rank_json").report)
    outcomes = [outcome(report)]
    processes = [process(468)]
    job.join_ranks(processes, job.merge_communicators(outcomes), ["192.0.2.2"])
    assert processes[0]["ranks"] == [{"comm": "0x228b0cacd66f2b5f", "rank": 0, "cuda_dev": 0}]
    uncovered = job.uncovered_processes(processes, outcomes)
    assert uncovered == []
    assert job.problems(processes, report["communicators"], [], uncovered) == {
        "missing_ranks": [],
        "async_errors": [],
        "count_mismatches": [],
        "uncovered": [],
    }


def test_the_stopped_h200_job_is_a_missing_rank_and_the_rest_unknown() -> None:
    """The recorded H200 run: the 1-rank job SIGSTOPped, RAS silent (no answer in 3 s)."""
    recorded = json.loads((GOLDEN / "h200x1" / "live_stopped.json").read_text())["data"]
    (stopped,) = recorded["processes"]
    assert stopped["state"] == "T"
    # That probe predates listener detection; the job listened on 127.0.0.1:28028 (its RAS
    # accepted the connection: `listening` true in the recorded attempt).
    stopped = {**stopped, "ras_listener": "127.0.0.1:28028"}
    outcomes = recorded["ras"]
    assert outcomes[0]["attempts"][0]["listening"] is True
    uncovered = job.uncovered_processes([stopped], outcomes)
    assert uncovered[0].startswith("RAS at localhost:28028: connected, but no answer")
    assert uncovered[1].endswith("no RAS answer names it")
    found = job.problems([stopped], [], [], uncovered)
    assert found["missing_ranks"][0].startswith(
        "pid 468 (/opt/torch/.venv/bin/python3 -c import os"
    )
    assert found["missing_ranks"][0].endswith("is stopped: its ranks and RAS are frozen")
    assert found["async_errors"] is None
    assert found["count_mismatches"] is None


def test_a_silent_endpoint_leaves_everything_unknown() -> None:
    uncovered = job.uncovered_processes([], [outcome(None)])
    assert uncovered
    assert job.problems([], [], [], uncovered)["missing_ranks"] is None


def test_nothing_listening_and_no_nccl_process_is_judged_empty() -> None:
    refused = outcome(None, listening=False)
    assert job.uncovered_processes([], [refused]) == []
    assert job.problems([], [], [], [])["missing_ranks"] == []


def test_a_process_that_only_loaded_libnccl_is_not_waited_for() -> None:
    frontend = process(900, ras_listener=None, listening=[])
    assert job.uncovered_processes([frontend], [outcome(None, listening=False)]) == []


def test_ras_disabled_with_a_gpu_is_uncovered() -> None:
    disabled = process(901, ras_endpoint=None, ras_listener=None, gpus=[{"uuid": "GPU-1"}])
    (line,) = job.uncovered_processes([disabled], [])
    assert line.endswith("RAS disabled (NCCL_RAS_ENABLE=0)")


def test_a_complete_text_report_covers_its_endpoint() -> None:
    text = reports.parse_text_report(capture("h200x1_1rank_text").report)
    assert job.uncovered_processes([process(468)], [outcome(text)]) == []


# ---------------------------------------------------------------- the RAS client, replayed


@pytest.mark.parametrize("case", ["h200x1_1rank_json", "h200x2_2rank_json", "h200x1_two_jobs_json"])
def test_json_exchange_replayed(case: str) -> None:
    with replay_server(capture(case)) as server:
        result, _ = ask(server)
    assert (result["answered"], result["format"], result["error"]) == (True, "json", None)
    assert result["report"] == reports.parse_json_report(capture(case).report)


def test_text_fallback_when_json_is_refused() -> None:
    with replay_server(capture("h200x2_2rank_text")) as server:
        result, transcript = ask(server)
    assert (result["answered"], result["format"], result["error"]) == (True, "text", None)
    assert result["report"]["groups"][0]["status"] == "RUNNING"
    assert ("<", "ERROR: Unknown command SET FORMAT json") in transcript


@pytest.mark.parametrize(
    ("case", "options"), [("h200x1_1rank_json", {}), ("h200x1_1rank_text", {"json": 0.0})]
)
def test_own_captures_replay_byte_for_byte(case: str, options: dict[str, float]) -> None:
    """What the probe sends and reads against the replay is the H200 exchange, line for line."""
    with replay_server(capture(case)) as server:
        _, transcript = ask(server, collective_timeout_s=2, **options)
    recorded = (GOLDEN / "ras" / case / "exchange.txt").read_text()
    assert client.render_transcript(transcript) == recorded


def test_a_silent_server_costs_the_read_timeout() -> None:
    with replay_server(behaviour="silent") as server:
        started = time.monotonic()
        result, _ = ask(server, read_timeout_s=0.5)
    assert time.monotonic() - started < 2.0
    assert not result["answered"]
    assert result["listening"] is True
    assert result["stage"] == "CLIENT PROTOCOL"
    assert "no answer to CLIENT PROTOCOL within 0.5 s" in result["error"]


def test_a_server_closing_early() -> None:
    with replay_server(behaviour="close_early") as server:
        result, _ = ask(server)
    assert not result["answered"]
    assert result["error"] == "the server closed the connection after CLIENT PROTOCOL 2"


def test_garbage_is_not_an_nccl_server() -> None:
    with replay_server(behaviour="garbage") as server:
        result, _ = ask(server)
    assert not result["answered"]
    assert result["error"] == "not an NCCL RAS server: it answered 'HTTP/1.1 400 Bad Request'"


def test_a_report_that_stalls_is_cut_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "RAS_EXTRA_TIMEOUT_S", 0.2)
    with replay_server(capture("h200x1_1rank_json"), behaviour="stall") as server:
        started = time.monotonic()
        result, _ = ask(server, collective_timeout_s=1, read_timeout_s=0.3)
    assert time.monotonic() - started < 3.0
    assert not result["answered"]
    assert result["stage"] == "VERBOSE STATUS"
    assert result["error"].startswith("timeout before the JSON report ended")


def test_nothing_listening() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    found = client.query_endpoint(f"127.0.0.1:{port}", [], settings(), time.monotonic() + 5)
    assert not found["answered"]
    assert found["attempts"][0]["listening"] is False
    assert found["error"] == "connection refused: nothing listens there"


def test_localhost_means_both_loopbacks() -> None:
    assert [family for family, _ in client.resolve("localhost", 28028)] == [
        socket.AF_INET,
        socket.AF_INET6,
    ]
    assert client.resolve("::1", 28030) == [(socket.AF_INET6, ("::1", 28030, 0, 0))]


def test_several_listeners_get_several_connections_within_the_budget() -> None:
    """Two live listeners that never answer: 2n+1 = 5 connections at most, and the budget."""
    with replay_server(behaviour="silent") as server:
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        listeners = [process(1), process(2)]
        started = time.monotonic()
        found = client.query_endpoint(
            endpoint, listeners, settings(read_timeout_s=0.2), started + 0.7
        )
    assert 2 <= len(found["attempts"]) <= 5
    assert time.monotonic() - started < 1.5
    assert not found["answered"]


def test_one_answer_naming_every_live_listener_is_enough() -> None:
    report_pid = 727
    with replay_server(capture("h200x2_2rank_json")) as server:
        endpoint = f"127.0.0.1:{server.server_address[1]}"
        listeners = [process(report_pid), process(728), process(999, state="T")]
        found = client.query_endpoint(endpoint, listeners, settings(), time.monotonic() + 5)
    assert found["answered"]
    assert len(found["attempts"]) == 1


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("localhost:28028", ("localhost", 28028)),
        ("10.0.0.5:29000", ("10.0.0.5", 29000)),
        ("[::1]:28030", ("::1", 28030)),
        ("10.0.0.5", ("10.0.0.5", 28028)),
        ("::1", ("::1", 28028)),
    ],
)
def test_parse_endpoint(text: str, endpoint: tuple[str, int]) -> None:
    assert client.parse_endpoint(text) == endpoint


def test_parse_endpoint_refuses_a_bad_port() -> None:
    with pytest.raises(ValueError, match="not a port"):
        client.parse_endpoint("host:http")


# ---------------------------------------------------------------- library identity (ELF)


def read_from(data: bytes) -> Any:
    return lambda offset, size: data[offset : offset + size]


def test_elf_layout_reads_build_id_and_rodata() -> None:
    data = build_elf(build_id=bytes(range(20)))
    layout = elf.elf_layout(read_from(data))
    assert layout["build_id"] == bytes(range(20)).hex()
    assert layout["error"] is None
    offset, size = layout["rodata"]
    assert elf.nccl_version_in(data[offset : offset + size]) == "2.99.1+cuda12.9"


def test_elf_layout_without_sections_uses_the_note_segment() -> None:
    layout = elf.elf_layout(read_from(build_elf(sections=False)))
    assert layout["build_id"] == bytes(range(20)).hex()
    assert layout["rodata"] is None


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"#!/bin/sh\n" * 10, "not an ELF file"),
        (b"\x7fELF\x01" + bytes(80), "not a 64-bit ELF file"),
    ],
)
def test_elf_layout_refuses_what_is_not_elf64(data: bytes, error: str) -> None:
    assert elf.elf_layout(read_from(data))["error"] == error


def mapped(path: Path, deleted: bool = False, inode: int | None = None) -> dict[str, Any]:
    return {
        "path": str(path),
        "device": "fe:00",
        "inode": path.stat().st_ino if inode is None else inode,
        "deleted": deleted,
        "range": "0-1",
    }


def test_library_version_from_rodata_reads_little(tmp_path: Path) -> None:
    library = tmp_path / "libnccl.so.2"
    library.write_bytes(build_elf(padding=4 * 1024 * 1024))  # 4 MiB the reader must not read
    libraries = elf.Libraries(str(tmp_path / "proc"))
    found = libraries.describe(1, "nccl", mapped(library))
    assert (found["version"], found["version_string"]) == ("2.99.1", "2.99.1+cuda12.9")
    assert found["read_from"] == "path"
    assert found["size"] == library.stat().st_size
    assert libraries.bytes_read < 64 * 1024
    again = libraries.describe(2, "nccl", mapped(library))  # another process, the same file
    assert again == found
    assert libraries.bytes_read < 64 * 1024


def test_library_version_without_sections_scans_the_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(elf, "FALLBACK_SCAN_CHUNK", 64)  # the string straddles chunks
    library = tmp_path / "libnccl.so.2"
    library.write_bytes(build_elf(sections=False))
    found = elf.Libraries(str(tmp_path / "proc")).describe(1, "nccl", mapped(library))
    assert found["version_string"] == "2.99.1+cuda12.9"


def test_a_deleted_or_replaced_library_is_not_read_as_the_mapped_one(tmp_path: Path) -> None:
    library = tmp_path / "libnccl.so.2"
    library.write_bytes(build_elf())
    libraries = elf.Libraries(str(tmp_path / "proc"))
    gone = libraries.describe(1, "nccl", mapped(library, deleted=True))
    assert gone["version_string"] is None
    assert "deleted since it was mapped" in gone["error"]
    replaced = libraries.describe(1, "nccl", mapped(library, inode=1))
    assert replaced["version_string"] is None
    assert "another file now" in replaced["error"]


def test_cuda_versions_come_from_file_names() -> None:
    assert elf.version_from_name("/usr/lib/libcuda.so.580.159.04") == "580.159.04"
    assert elf.version_from_name("/x/nvidia/cu13/lib/libcudart.so.13") is None
    assert elf.version_from_name("/x/libnccl.so.2.28.9") == "2.28.9"


# ---------------------------------------------------------------- small parsers


def test_mask_cmdline() -> None:
    args = [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "abc",
        "--token=xyz",
        "--port",
        "8000",
        "-x",
        "s3cretvalue",
    ]
    assert procfs.mask_cmdline(args, ["s3cretvalue"]) == (
        "vllm serve m --api-key *** --token=*** --port 8000 -x ***"
    )
    assert procfs.mask_cmdline(["python3", "-c", "x" * 5000]).endswith("…")


def test_allowed_environment() -> None:
    environ = {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_PASSWORD": "hunter2hunter2",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_TOKEN": CANARY,
        "PATH": "/bin",
    }
    assert procfs.allowed_environment(environ) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_PASSWORD": "***",
    }
    assert procfs.secret_values(environ) == [CANARY, "hunter2hunter2"]


def test_parse_status_in_a_container() -> None:
    text = "Name:\tvllm\nState:\tT (stopped)\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t91234\t17\n"
    assert procfs.parse_status(text) == {
        "name": "vllm",
        "state": "T",
        "ppid": 1,
        "uid": 1000,
        "ns_pid": 17,
    }


def test_parse_compute_apps() -> None:
    # nvidia-smi's csv,noheader form; the values are those the H200 run reported (built line).
    text = "468, GPU-779eb2cf-8007-cf8f-fac9-54618c182bb3, 1188 MiB\n581, GPU-779e, [N/A]\n"
    assert live.parse_compute_apps(text) == [
        {
            "pid": 468,
            "gpu_uuid": "GPU-779eb2cf-8007-cf8f-fac9-54618c182bb3",
            "used_memory_mib": 1188,
        },
        {"pid": 581, "gpu_uuid": "GPU-779e", "used_memory_mib": None},
    ]
    assert live.parse_compute_apps("No running processes found\n") == []


def test_proc_net_golden() -> None:
    net = GOLDEN / "proc_net" / "local"
    tcp = procfs.parse_net_tcp((net / "tcp").read_text())
    assert {(e["address"], e["port"]) for e in tcp} == {("127.0.0.1", 28028), ("0.0.0.0", 2024)}
    (tcp6,) = procfs.parse_net_tcp((net / "tcp6").read_text())
    assert (tcp6["address"], tcp6["port"]) == ("::1", 28030)
    assert "192.0.2.2" in procfs.parse_fib_trie((net / "fib_trie").read_text())
    assert "::1" in procfs.parse_if_inet6((net / "if_inet6").read_text())
    assert not procfs.hidepid_from_mountinfo((net / "mountinfo_proc_line").read_text())
    assert procfs.hidepid_from_mountinfo((net / "mountinfo_hidepid_line").read_text())
    assert (net / "SOURCE.md").is_file()


def test_ras_listener_is_the_socket_on_the_endpoint_port() -> None:
    listening = [("0.0.0.0", 8000), ("127.0.0.1", 28028)]
    assert live.ras_listener("localhost:28028", listening) == "127.0.0.1:28028"
    assert live.ras_listener("10.0.0.5:29000", listening) is None
    assert live.ras_listener(None, listening) is None


# ---------------------------------------------------------------- the /proc scan on a built tree


def fake_proc(root: Path, pids: dict[int, dict[str, Any]]) -> Path:
    """A /proc-like tree: per pid its maps (text) and status (ppid)."""
    for pid, files in pids.items():
        folder = root / str(pid)
        folder.mkdir(parents=True)
        (folder / "maps").write_text(files.get("maps", ""))
        (folder / "status").write_text(
            f"Name:\tx\nState:\tS\nPPid:\t{files.get('ppid', 1)}\nUid:\t0\n"
        )
    (root / "self").mkdir()
    return root


NCCL_MAPS = "7f00-7f10 r-xp 00000000 fe:00 42   /usr/lib/libnccl.so.2.28.9\n"


def test_scan_finds_candidates_says_what_it_could_not_read(tmp_path: Path, monkeypatch) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        {
            10: {"maps": NCCL_MAPS},
            11: {"maps": "7f00-7f10 r-xp 0 fe:00 1 /usr/lib/libc.so.6\n"},
            12: {},
        },
    )
    real_read = procfs.read_bytes

    def closed(path: str, limit: int = -1) -> bytes:
        if path == f"{proc}/12/maps":
            raise PermissionError(13, "Permission denied")
        return real_read(path, limit)

    monkeypatch.setattr(procfs, "read_bytes", closed)
    scan = procfs.Scan(str(proc))
    scan.run()
    assert sorted(scan.candidates) == [10]
    assert scan.unreadable == {12: "PermissionError"}
    assert scan.entries == 3


def test_scan_knows_the_runners_own_processes(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        {100: {"ppid": 1}, 101: {"ppid": 100}, 102: {"ppid": 101}, 200: {"ppid": 1}},
    )
    scan = procfs.Scan(str(proc), own_root=100)
    assert scan.is_own(102)
    assert scan.is_own(100)
    assert not scan.is_own(200)
    assert not procfs.Scan(str(proc)).is_own(102)


# ---------------------------------------------------------------- by hand, beside stand-ins


@pytest.fixture
def standin_library(tmp_path: Path) -> Path:
    path = tmp_path / "lib" / "libnccl.so.2"
    path.parent.mkdir()
    path.write_bytes(build_elf(build_id=b"\xab" * 20))
    return path


@pytest.fixture
def standin(standin_library: Path) -> Iterator[Any]:
    """Start stand-in jobs (tests/probes/standin_job.py); every one is ended afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(
        port: int, serve: str | None = None, extra: tuple[str, ...] = ()
    ) -> subprocess.Popen[str]:
        args = [REMOTE_PYTHON, "-m", "tests.probes.standin_job", "--listen", str(port)]
        args += ["--serve", serve] if serve else []
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "NCCL_RAS_ADDR": f"127.0.0.1:{port}",
            "NCCL_DEBUG": "WARN",
            "HF_TOKEN": CANARY,
        }
        job = subprocess.Popen(
            [*args, str(standin_library), "--", *extra],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(job)
        assert job.stdout
        assert job.stdout.readline().strip() == "ready"
        return job

    yield start
    for job in started:
        with_signal(job.pid, signal.SIGCONT)
        if job.stdin:
            job.stdin.close()
        try:
            job.wait(10)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait(10)


def with_signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def free_port() -> int:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        return int(placeholder.getsockname()[1])


def mine(result: dict[str, Any], job: Any) -> dict[str, Any]:
    return next(p for p in result["data"]["processes"] if p["pid"] == job.pid)


FAST_BY_HAND = {"ras_read_timeout_s": 0.5, "ras_collective_timeout_s": 1}


@LINUX
def test_by_hand_a_serving_job_is_found_named_and_judged(standin: Any) -> None:
    port = free_port()
    job = standin(
        port, str(GOLDEN / "ras" / "h200x1_1rank_json" / "exchange.txt"), ("--api-key", CANARY)
    )
    result = run_by_hand("live", FAST_BY_HAND)
    assert CANARY not in json.dumps(result)
    found = mine(result, job)
    (library,) = found["libraries"]["nccl"]
    assert (library["version_string"], library["build_id"]) == ("2.99.1+cuda12.9", "ab" * 20)
    assert found["ras_listener"] == f"127.0.0.1:{port}"
    assert found["env"]["NCCL_RAS_ADDR"] == f"127.0.0.1:{port}"
    assert "HF_TOKEN" not in found["env"]
    assert found["cmdline"].endswith("--api-key ***")
    assert found["ranks"] == [{"comm": "0x228b0cacd66f2b5f", "rank": 0, "cuda_dev": 0}]
    assert result["data"]["problems"]["missing_ranks"] == []


@LINUX
def test_by_hand_a_stopped_job_is_named_within_seconds(standin: Any) -> None:
    job = standin(free_port(), str(GOLDEN / "ras" / "h200x1_1rank_json" / "exchange.txt"))
    os.kill(job.pid, signal.SIGSTOP)
    started = time.monotonic()
    result = run_by_hand("live", FAST_BY_HAND)
    assert time.monotonic() - started < 10
    problems = result["data"]["problems"]
    assert any(
        f"pid {job.pid} " in line and "is stopped" in line for line in problems["missing_ranks"]
    )
    assert problems["async_errors"] is None  # its RAS is frozen: not judged


@LINUX
def test_by_hand_a_wedged_ras_leaves_the_host_unknown(standin: Any) -> None:
    job = standin(free_port())  # listens, never answers
    result = run_by_hand("live", FAST_BY_HAND)
    problems = result["data"]["problems"]
    assert problems["missing_ranks"] is None
    assert problems["count_mismatches"] is None
    assert any(f"pid {job.pid} " in line for line in problems["uncovered"])


@LINUX
def test_by_hand_two_jobs_on_one_port_get_more_than_one_connection(standin: Any) -> None:
    port = free_port()
    exchange = str(GOLDEN / "ras" / "h200x1_1rank_json" / "exchange.txt")
    first, second = standin(port, exchange), standin(port, exchange)
    result = run_by_hand("live", FAST_BY_HAND)
    (endpoint,) = [r for r in result["data"]["ras"] if r["endpoint"] == f"127.0.0.1:{port}"]
    named = {
        a["report"]["communicators"][0]["ranks"][0]["pid"]
        for a in endpoint["attempts"]
        if a["report"]
    }
    # SO_REUSEPORT hands each connection to one listener at random: up to 5 connections are made
    # until both are named; a pid that no answer named is said to be uncovered, never judged.
    assert named <= {first.pid, second.pid}
    assert 1 <= len(endpoint["attempts"]) <= 5
    uncovered = result["data"]["problems"]["uncovered"]
    for job in (first, second):
        assert job.pid in named or any(f"pid {job.pid} " in line for line in uncovered)


@LINUX
def test_by_hand_with_no_job_costs_little() -> None:
    result = run_by_hand("live")
    assert result["ok"]
    assert result["data"]["scan"]["total_s"] < 2.0


def test_fleets_own_processes_are_not_jobs(
    tmp_path: Path, monkeypatch, standin_library: Path
) -> None:
    """Under the runner, probes preloaded with torch map libnccl: the live probe skips them."""
    from fleet.execution.bundle import build_bundle
    from tests.runner.conftest import make_bundle, run_bundle

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    (tmp_path / "fleet_test_nccl.py").write_text(
        "import mmap, os\n"
        f"HELD = mmap.mmap(os.open({str(standin_library)!r}, os.O_RDONLY), 0, prot=mmap.PROT_READ)\n"
    )
    holder = 'import time\nPRELOAD = ("fleet_test_nccl",)\ndef collect(options):\n    time.sleep(3)\n    return {"ok": True, "data": {}}\n'
    # The live probe waits a second, so the fork server has imported (mapped) by then.
    source = (REPO / "probes" / "live.py").read_text() + (
        "\n_collect = collect\n\n\ndef collect(options):\n    import time\n\n"
        "    time.sleep(1.0)\n    return _collect(dict(options, ras=False))\n"
    )
    # Two probes share a preload (one alone is forked the ordinary way): a fork server that
    # imported the module, and the two probes it forked, all map the stand-in libnccl.
    bundle = make_bundle({"holder": holder, "holder2": holder, "live": source})
    helpers = build_bundle(["live"]).probes["live"].files  # the live probe's SHIPS, as shipped
    probes = dict(bundle.probes, live=dataclasses.replace(bundle.probes["live"], files=helpers))
    outcome = run_bundle(dataclasses.replace(bundle, probes=probes))["local"]
    data = outcome.probes["live"].data
    assert outcome.probes["live"].status == "ok", outcome.probes["live"].error
    assert data["excluded_own"] >= 2  # the probes forked from the fork server (and it, if alive)
    assert not [p for p in data["processes"] if str(standin_library) in json.dumps(p)]


@LINUX
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the probe as another user")
def test_by_hand_as_another_user_says_what_it_could_not_read(standin: Any) -> None:
    python = "/usr/bin/python3"

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    try:
        subprocess.run([python, "-c", "pass"], preexec_fn=nobody, check=True, timeout=30)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no interpreter the user nobody may run")
    job = standin(free_port())
    probe = subprocess.run(
        [python, str(BY_HAND), "live", json.dumps(FAST_BY_HAND)],
        preexec_fn=nobody,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    )
    data = json.loads(probe.stdout)["data"]
    assert job.pid not in [p["pid"] for p in data["processes"]]
    assert data["unreadable"]["count"] >= 1
    assert data["unreadable"]["by_user"]
    seen = [p for p in data["unreadable"]["nccl_processes"] if p["pid"] == job.pid]
    assert seen
    assert seen[0]["nccl_threads"] == ["NCCL RAS", "NCCL Service"]
    assert any(f"pid {job.pid} " in line for line in data["problems"]["uncovered"])
    assert copy.deepcopy(data)["problems"]["missing_ranks"] is None
