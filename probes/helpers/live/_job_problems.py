"""What is wrong with the NCCL jobs on a host, from the RAS reports and /proc: missing, dead or
stopped ranks, asynchronous errors, collective counts that differ, and what no RAS answer covers.

Not a probe (the leading underscore): probes/live.py imports it and lists it in its `SHIPS`.
Pure functions over the probe's data. Stdlib only, Python 3.8.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from _ras_reports import pids_in

EXCERPT_CHARS = 80


# ---------------------------------------------------------------- pure: what is wrong


def problems(
    processes: List[Dict[str, Any]],
    communicators: List[Dict[str, Any]],
    text_reports: List[Dict[str, Any]],
    uncovered: List[str],
) -> Dict[str, Any]:
    """Each kind of problem as a list of sentences, or None when it could not be judged: some
    NCCL process here (`uncovered`, named) is in no RAS report and nothing was found wrong.

    A stopped (T), traced (t) or zombie (Z) NCCL process here is a dead rank whatever RAS says."""
    missing: List[str] = []
    for process in processes:
        if process.get("state") in ("T", "t", "Z") and runs_nccl(process):
            missing.append(
                "pid %s (%s) is %s: its ranks and RAS are frozen"
                % (process["pid"], _short(process.get("cmdline")), _state_word(process["state"]))
            )
    async_errors: List[str] = []
    mismatches: List[str] = []
    for comm in communicators:
        name = "comm %s" % comm.get("hash")
        for rank in comm.get("missing_ranks") or []:
            status = rank.get("status") or {}
            why = (
                "considered dead"
                if status.get("considered_dead")
                else "unresponsive"
                if status.get("unresponsive")
                else "answered without this communicator"
            )
            missing.append("%s rank %s: %s (%s)" % (name, rank.get("rank"), _where(rank), why))
        for rank in comm.get("async_error_ranks") or []:
            async_errors.append(
                "%s rank %s: %s (%s)" % (name, rank["rank"], rank["error"], _where(rank))
            )
        for op, (low, high) in sorted((comm.get("count_ranges") or {}).items()):
            mismatches.append(
                "%s %s: ranks at %d..%d (behind: rank %s)"
                % (name, op, low, high, ", ".join(str(r) for r in comm.get("lagging_ranks") or []))
            )
    for report in text_reports:
        _text_problems(report, missing, async_errors, mismatches)
    judged = not uncovered
    return {
        "missing_ranks": missing if missing or judged else None,
        "async_errors": async_errors if async_errors or judged else None,
        "count_mismatches": mismatches if mismatches or judged else None,
        "uncovered": uncovered,
    }


def runs_nccl(process: Dict[str, Any]) -> bool:
    """Whether a process that mapped libnccl shows it runs NCCL: it serves RAS, RAS names its
    ranks, or (NCCL_SET_THREAD_NAME=1) it has NCCL's threads."""
    return bool(process.get("ras_listener") or process.get("ranks") or process.get("nccl_threads"))


def _text_problems(
    report: Dict[str, Any], missing: List[str], async_errors: List[str], mismatches: List[str]
) -> None:
    for block in report.get("errors") or []:
        name = "comm %s" % block["comm"] if block["comm"] else "job"
        if block["kind"] in ("INCOMPLETE", "DEAD"):
            missing.extend(_dead_in_block(block, name))
        elif block["kind"] == "ERROR":
            async_errors.extend(_errors_in_block(block, name))
    for block in report.get("warnings") or []:
        if block["kind"] == "MISMATCH":
            differ = [line for line in block["lines"] if "operation counts" in line]
            if differ:
                mismatches.append("comm %s: %s" % (block["comm"], "; ".join(differ)))


def _dead_in_block(block: Dict[str, Any], name: str) -> List[str]:
    """The processes and ranks an INCOMPLETE or DEAD block of the text report names."""
    why = "considered dead" if block["kind"] == "DEAD" else "no RAS answer"
    found = ["%s: %s (%s)" % (name, _where(process), why) for process in block["processes"]]
    for rank in block["ranks"]:
        found.append("%s rank %s: %s (%s)" % (name, rank["rank"], _where(rank), why))
    return found


def _errors_in_block(block: Dict[str, Any], name: str) -> List[str]:
    """The ranks with an asynchronous error (or that reported one) in an ERROR block."""
    found = []
    for rank in block["ranks"]:
        if rank["detail"] and "asynchronous" in rank["detail"]:
            found.append("%s rank %s: %s" % (name, rank["rank"], _where(rank)))
        elif rank["detail"] and rank["detail"].startswith("reported"):
            found.append("%s rank %s %s: %s" % (name, rank["rank"], rank["detail"], _where(rank)))
    return found


def _where(item: Dict[str, Any]) -> str:
    gpu = item.get("gpu") if item.get("gpu") is not None else item.get("cuda_dev")
    text = "pid %s on %s" % (item.get("pid"), item.get("host"))
    return text + (", GPU %s" % gpu if gpu is not None else "")


def _state_word(state: str) -> str:
    return {"T": "stopped", "t": "stopped by a tracer", "Z": "a zombie"}.get(state, state)


def _short(text: Optional[str]) -> str:
    text = " ".join((text or "?").split())  # a `python -c SOURCE` command line spans lines
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


# ---------------------------------------------------------------- joining it up


def merge_communicators(outcomes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The JSON reports' communicators, one per hash (the first answer's), with the endpoint and
    the NCCL version that reported it."""
    merged: Dict[str, Dict[str, Any]] = {}
    for outcome in outcomes:
        for attempt in outcome["attempts"]:
            report = attempt.get("report") or {}
            for comm in report.get("communicators") or []:
                key = str(comm.get("hash"))
                if key not in merged:
                    merged[key] = dict(
                        comm, endpoint=outcome["endpoint"], nccl_version=report.get("nccl_version")
                    )
    return list(merged.values())


def join_ranks(
    processes: List[Dict[str, Any]], communicators: List[Dict[str, Any]], addresses: List[str]
) -> None:
    """Each local process gets the ranks RAS says it holds ({comm, rank, cuda_dev}); a rank whose
    host is not one of this host's addresses is another host's (when the addresses are known)."""
    by_pid: Dict[int, Dict[str, Any]] = {}
    for process in processes:
        by_pid[process.get("ns_pid") or process["pid"]] = process
    for comm in communicators:
        for rank in comm.get("ranks") or []:
            if addresses and rank.get("host") not in addresses:
                continue
            holder = by_pid.get(rank.get("pid"))
            if holder is not None:
                holder["ranks"].append(
                    {
                        "comm": comm.get("hash"),
                        "rank": rank.get("rank"),
                        "cuda_dev": rank.get("cuda_dev"),
                    }
                )


def uncovered_processes(
    processes: List[Dict[str, Any]], outcomes: List[Dict[str, Any]]
) -> List[str]:
    """What no RAS answer covers: NCCL processes here that RAS names nowhere, and endpoints that
    accepted a connection but never answered. A text report (NCCL before 2.28.7) names no pid when
    all is well: a complete one covers the processes listening on the endpoint that gave it."""
    named = set()
    text_endpoints = set()
    found = []
    for outcome in outcomes:
        for attempt in outcome["attempts"]:
            named |= pids_in(attempt.get("report"))
            report = attempt.get("report") or {}
            if report.get("format") == "text" and report.get("complete"):
                text_endpoints.add(outcome["endpoint"])
    found += ["RAS at %s: %s" % (endpoint, why) for endpoint, why in _unanswered(outcomes)]
    for process in processes:
        disabled = process["ras_endpoint"] is None
        if not runs_nccl(process) and not (disabled and process.get("gpus")):
            continue
        if (process.get("ns_pid") or process["pid"]) in named:
            continue
        if process["ras_endpoint"] in text_endpoints:
            continue
        why = "RAS disabled (NCCL_RAS_ENABLE=0)" if disabled else "no RAS answer names it"
        found.append("pid %d (%s): %s" % (process["pid"], _short(process["cmdline"]), why))
    return found


def _unanswered(outcomes: List[Dict[str, Any]]) -> List[Tuple[str, str]]:
    """(endpoint, why) for each endpoint that accepted a connection but gave no answer, and for
    each report there that could be read neither in JSON nor in text."""
    found = []
    for outcome in outcomes:
        if not outcome["answered"] and any(a.get("listening") for a in outcome["attempts"]):
            found.append((outcome["endpoint"], outcome["error"]))
        elif outcome.get("unreadable"):
            found += [(outcome["endpoint"], why) for why in outcome["unreadable"]]
    return found


def ras_readable(outcomes: List[Dict[str, Any]]) -> Tuple[Optional[bool], Optional[str]]:
    """(readable, why not): False when an NCCL RAS server (one that answered the handshake) gave
    no report that could be read, in JSON or in text (its jobs are unknown, never clean); True
    when every such server's report was read; None when no RAS server answered at all."""
    spoke = [o for o in outcomes if any(a.get("server_protocol") for a in o["attempts"])]
    unread = _unanswered(spoke)
    if unread:
        return False, "; ".join("RAS at %s: %s" % (e, why) for e, why in unread)
    return (True, None) if spoke else (None, None)


JOB_ENV = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "MASTER_ADDR", "MASTER_PORT")


def jobs_of(processes: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """The local NCCL processes grouped by job: processes holding ranks of one communicator, or
    started with the same launcher identity (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, MASTER_ADDR and
    MASTER_PORT), are one job. A process showing neither is left out (its job is not known)."""
    groups: List[Tuple[set, List[Dict[str, Any]]]] = []
    for process in processes:
        keys = {("comm", rank.get("comm")) for rank in process.get("ranks") or []}
        launcher = tuple((process.get("env") or {}).get(name) for name in JOB_ENV)
        if any(launcher):
            keys.add(("launcher", launcher))
        if not keys:
            continue
        joined = [group for group in groups if group[0] & keys]
        groups = [group for group in groups if not group[0] & keys]
        members = [process] + [p for _, ps in joined for p in ps]
        groups.append((keys.union(*[k for k, _ in joined]), members))
    return [sorted(members, key=lambda p: p["pid"]) for _, members in groups]


def shared_ras_ports(
    processes: List[Dict[str, Any]], jobs: List[List[Dict[str, Any]]]
) -> List[str]:
    """RAS endpoints that serve more than one job: NCCL binds its RAS port with SO_REUSEPORT, so
    each connection reaches one job's process and the other job's ranks go unseen."""
    job_of = {id(p): index for index, members in enumerate(jobs) for p in members}
    by_endpoint: Dict[str, Dict[int, List[int]]] = {}
    for process in processes:
        if process.get("ras_endpoint") and id(process) in job_of:
            jobs_here = by_endpoint.setdefault(process["ras_endpoint"], {})
            jobs_here.setdefault(job_of[id(process)], []).append(process["pid"])
    found = []
    for endpoint, jobs_here in sorted(by_endpoint.items()):
        if len(jobs_here) > 1:
            pids = "; ".join(", ".join(str(p) for p in pids) for pids in jobs_here.values())
            found.append(
                "RAS at %s is shared by %d jobs (pids %s): a RAS client reaches one of them per "
                "connection; give each job its own NCCL_RAS_ADDR port"
                % (endpoint, len(jobs_here), pids)
            )
    return found


def nccl_versions_differ(jobs: List[List[Dict[str, Any]]]) -> List[str]:
    """Jobs whose processes here mapped different libnccl versions: NCCL's RAS peers refuse each
    other across versions (and the job's collectives may not agree either)."""
    found = []
    for members in jobs:
        versions = {p["nccl_version"] for p in members if p.get("nccl_version")}
        if len(versions) > 1:
            found.append(
                "job of pids %s: libnccl %s; RAS peers of different NCCL versions refuse each other"
                % (
                    ", ".join(str(p["pid"]) for p in members),
                    ", ".join("%s (pid %d)" % (p["nccl_version"], p["pid"]) for p in members),
                )
            )
    return found
