"""Running NCCL jobs: the libnccl, libcudart, libcuda each process mapped, its GPUs, NCCL RAS's word.

Read-only: it reads /proc (maps, status, environ, thread names), asks `nvidia-smi
--query-compute-apps` once, and asks each NCCL RAS endpoint (localhost:28028, and every
NCCL_RAS_ADDR seen) for its status report; it never signals, traces or attaches to a process.

What it could not read is said: other users' processes whose maps are closed to this user are
counted by user under `unreadable` (those whose thread names, which /proc shows to anyone, show
NCCL at work are named one by one), and a RAS endpoint that does not answer within its short timeouts is reported
with the stage it stopped at. `problems.*` are lists, or null when they could not be judged (an
NCCL process here that no RAS report covers): a rule reading null is unknown, never a pass.

A JSON report is read after repairing NCCL 2.28.7-2.28.9's known defect (no comma after a missing
rank's "nvml_dev"); one that still does not parse is asked for again in text, on a new
connection. A RAS server that answered the handshake but gave nothing readable in either format
sets `ras_readable: false` with `ras_error`, and is named in problems.uncovered: its jobs are
unknown. problems.shared_ras_ports names RAS endpoints (each process's own NCCL_RAS_ADDR) that
serve two jobs, problems.nccl_versions_differ jobs whose processes here mapped different libnccl.

Outcome: ok is True whenever /proc could be scanned, also with no NCCL process at all (an idle host
is a fact, and rules are then n/a); ok is False only when /proc cannot be read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from _elf import Libraries
from _job_problems import (
    jobs_of,
    join_ranks,
    merge_communicators,
    nccl_versions_differ,
    problems,
    ras_readable,
    shared_ras_ports,
    uncovered_processes,
)
from _procfs import (
    ENVIRON_MAX_BYTES,
    PROC,
    Listeners,
    Scan,
    allowed_environment,
    endpoint_text,
    hidepid,
    local_addresses,
    mask_cmdline,
    parse_cmdline,
    parse_environ,
    parse_maps,
    parse_status,
    read_bytes,
    read_text,
    secret_values,
    thread_kinds,
    thread_names,
    user_name,
)
from _ras_client import (
    RAS_ATTEMPTS,
    RAS_BUDGET_S,
    RAS_COLLECTIVE_TIMEOUT_S,
    RAS_CONNECT_TIMEOUT_S,
    RAS_DEFAULT,
    RAS_READ_TIMEOUT_S,
    parse_endpoint,
    query_endpoint,
)

TIMEOUT_S = 60
# The helpers beside this file (probes/_*.py) that the bundle carries and the host runner makes
# importable by name; a helper imported by a helper is listed too.
SHIPS = ("_procfs.py", "_elf.py", "_ras_reports.py", "_ras_client.py", "_job_problems.py")
# How the controller compares this probe's fields across hosts (see fleet/analysis/facts.py): a
# live job is not a host's configuration, so nothing here is a divergence between hosts.
FACTS = {
    "identity": ["local_addresses"],
    "volatile": [
        "processes",
        "unreadable",
        "gpu_apps",
        "ras",
        "communicators",
        "problems",
        "scan",
        "excluded_own",
    ],
}

NVIDIA_SMI_ARGS = ("--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader")
NVIDIA_SMI_TIMEOUT_S = 5.0


def parse_compute_apps(text: str) -> List[Dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader`."""
    apps = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        memory = re.match(r"^(\d+)", cells[2]) if len(cells) > 2 else None
        apps.append(
            {
                "pid": int(cells[0]),
                "gpu_uuid": cells[1],
                "used_memory_mib": int(memory.group(1)) if memory else None,
            }
        )
    return apps


def describe_process(
    proc: str,
    pid: int,
    maps_text: str,
    libraries: Libraries,
    users: Dict[int, str],
    listeners: Optional[Listeners] = None,
) -> Optional[Dict[str, Any]]:
    """Everything about one NCCL process; None when it ended meanwhile."""
    try:
        status = parse_status(read_text("%s/%d/status" % (proc, pid)))
        args = parse_cmdline(read_bytes("%s/%d/cmdline" % (proc, pid)))
    except OSError:
        return None
    environ: Dict[str, str] = {}
    env_error = None
    try:
        environ = parse_environ(read_bytes("%s/%d/environ" % (proc, pid), ENVIRON_MAX_BYTES))
    except OSError as exc:
        env_error = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
    mapped = parse_maps(maps_text)
    threads = thread_kinds(thread_names(proc, pid))
    found = {
        kind: [libraries.describe(pid, kind, entry) for entry in entries]
        for kind, entries in mapped.items()
    }
    versions = sorted({lib["version"] for lib in found["nccl"] if lib["version"]})
    endpoint = ras_endpoint_of(environ) if env_error is None else RAS_DEFAULT
    listening = (listeners or Listeners(proc)).of(pid)
    return {
        "pid": pid,
        "ns_pid": status["ns_pid"] if status["ns_pid"] != pid else None,
        "user": user_name(status["uid"], users),
        "state": status["state"],
        "name": status["name"],
        "cmdline": mask_cmdline(args, secret_values(environ)),
        "libraries": found,
        "nccl_version": ",".join(versions) if versions else None,
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "env": allowed_environment(environ),
        "env_error": env_error,
        "ras_endpoint": endpoint,
        "ras_listener": ras_listener(endpoint, listening),
        "listening": [endpoint_text(address, port) for address, port in listening],
        "nccl_threads": threads,
        "gpus": [],
        "ranks": [],
    }


def ras_listener(endpoint: Optional[str], listening: List[Tuple[str, int]]) -> Optional[str]:
    """The socket on which this process serves RAS: one it listens on at its endpoint's port.
    (NCCL names its threads only with NCCL_SET_THREAD_NAME=1; this socket is always there.)"""
    if endpoint is None:
        return None
    try:
        port = parse_endpoint(endpoint)[1]
    except ValueError:
        return None
    found = [endpoint_text(a, p) for a, p in listening if p == port]
    return found[0] if found else None


def ras_endpoint_of(environ: Dict[str, str]) -> Optional[str]:
    """Where a process's RAS listens: NCCL_RAS_ADDR or the default; None with NCCL_RAS_ENABLE=0."""
    if environ.get("NCCL_RAS_ENABLE", "1").strip() == "0":
        return None
    return environ.get("NCCL_RAS_ADDR") or RAS_DEFAULT


def describe_unreadable(
    proc: str, unreadable: Dict[int, str], users: Dict[int, str], budget_s: float = 0.25
) -> Dict[str, Any]:
    """Counts by user, and each process whose thread names show NCCL at work (thread names are
    readable by every user; see thread_kinds)."""
    by_user: Dict[str, int] = {}
    nccl: List[Dict[str, Any]] = []
    deadline = time.monotonic() + budget_s
    threads_checked = True
    for pid in sorted(unreadable):
        try:
            uid = os.stat("%s/%d" % (proc, pid)).st_uid
        except OSError:
            continue
        user = user_name(uid, users) or "?"
        by_user[user] = by_user.get(user, 0) + 1
        if time.monotonic() > deadline:
            threads_checked = False
            continue
        kinds = thread_kinds(thread_names(proc, pid))
        if kinds:
            try:  # status and cmdline are readable by every user, environ and maps are not
                status = parse_status(read_text("%s/%d/status" % (proc, pid)))
                args = parse_cmdline(read_bytes("%s/%d/cmdline" % (proc, pid)))
            except OSError:
                continue
            nccl.append(
                {
                    "pid": pid,
                    "ns_pid": status["ns_pid"] if status["ns_pid"] != pid else None,
                    "user": user,
                    "state": status["state"],
                    "cmdline": mask_cmdline(args),
                    "nccl_threads": kinds,
                    "ras_endpoint": RAS_DEFAULT,  # its environment is closed: assumed
                    "ras_listener": None,
                    "listening": None,  # its sockets are closed to this user
                    "gpus": [],
                    "ranks": [],
                }
            )
    return {
        "count": sum(by_user.values()),
        "by_user": by_user,
        "nccl_processes": nccl,
        "threads_checked": threads_checked,
    }


def compute_apps(timeout_s: float) -> Dict[str, Any]:
    """`nvidia-smi --query-compute-apps` once: which pid holds which GPU."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return {"ran": False, "apps": [], "error": "nvidia-smi not found"}
    try:
        done = subprocess.run(
            [executable, *NVIDIA_SMI_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"ran": True, "apps": [], "error": "timed out after %g s" % timeout_s}
    stdout = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or stdout.strip()
        return {"ran": True, "apps": [], "error": "%s (exit code %d)" % (message, done.returncode)}
    return {"ran": True, "apps": parse_compute_apps(stdout), "error": None}


def _options(options: Dict[str, Any]) -> Dict[str, float]:
    return {
        "connect_timeout_s": float(options.get("ras_connect_timeout_s", RAS_CONNECT_TIMEOUT_S)),
        "read_timeout_s": float(options.get("ras_read_timeout_s", RAS_READ_TIMEOUT_S)),
        "collective_timeout_s": float(
            options.get("ras_collective_timeout_s", RAS_COLLECTIVE_TIMEOUT_S)
        ),
        "attempts": float(options.get("ras_attempts", RAS_ATTEMPTS)),
        "budget_s": float(options.get("ras_budget_s", RAS_BUDGET_S)),
        "json": float(str(options.get("ras_format", "json")).lower() != "text"),
    }


def _string_list(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value or []]


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}.

    Options: ras (default true), ras_endpoints (more "host:port" to ask), ras_format ("json", the
    default, falls back to text where refused; "text" never asks for JSON), ras_connect_timeout_s,
    ras_read_timeout_s, ras_collective_timeout_s, ras_attempts, ras_budget_s, nvidia_smi_timeout_s,
    transcripts (true: keep each RAS exchange as text under ras[].transcripts, for captures)."""
    clock = {"started": time.monotonic()}
    proc = str(options.get("proc", PROC))
    # Under the fleet runner the parent is the runner: it and the probes it forked (some have
    # imported torch, so they map libnccl) are fleet's own, not jobs.
    own_root = os.getppid() if __name__.startswith("fleet_probe_") else None
    scan = Scan(proc, own_root)
    try:
        scan.run()
    except OSError as exc:
        return {"ok": False, "data": {}, "error": "cannot list %s: %s" % (proc, exc)}
    clock["scanned"] = time.monotonic()
    libraries = Libraries(proc)
    found = describe_all(proc, scan, libraries)
    everyone = found["processes"] + found["unreadable"]["nccl_processes"]
    gpu_apps: Dict[str, Any] = {"ran": False, "apps": [], "error": None}
    if everyone:
        gpu_apps = gpu_holders(everyone, options)
    addresses = local_addresses(proc)
    clock["described"] = time.monotonic()
    outcomes = ask_ras(found["processes"], everyone, options) if options.get("ras", True) else []
    communicators = merge_communicators(outcomes)
    join_ranks(everyone, communicators, addresses)
    readable, unreadable_why = ras_readable(outcomes)
    data = {
        "processes": found["processes"],
        "unreadable": found["unreadable"],
        "excluded_own": found["excluded"],
        "gpu_apps": gpu_apps,
        "ras": outcomes,
        "communicators": communicators,
        "ras_readable": readable,
        "ras_error": unreadable_why,
        "problems": _problems(everyone, communicators, outcomes),
        "local_addresses": addresses,
        "scan": _scan_figures(scan, libraries, clock),
    }
    return {"ok": True, "data": data, "error": None}


def describe_all(proc: str, scan: Scan, libraries: Libraries) -> Dict[str, Any]:
    """Every NCCL process the scan found (fleet's own left out and counted), and what could not
    be read."""
    users: Dict[int, str] = {}
    sockets = Listeners(proc)
    processes: List[Dict[str, Any]] = []
    excluded = 0
    for pid in sorted(scan.candidates):
        if scan.is_own(pid):
            excluded += 1
            continue
        process = describe_process(proc, pid, scan.candidates[pid], libraries, users, sockets)
        if process is not None:
            processes.append(process)
    unreadable = describe_unreadable(proc, scan.unreadable, users)
    unreadable["hidepid"] = hidepid(proc)
    return {"processes": processes, "unreadable": unreadable, "excluded": excluded}


def gpu_holders(everyone: List[Dict[str, Any]], options: Dict[str, Any]) -> Dict[str, Any]:
    """`nvidia-smi --query-compute-apps` once; each process gets the GPUs it holds."""
    asked = time.monotonic()
    gpu_apps = compute_apps(float(options.get("nvidia_smi_timeout_s", NVIDIA_SMI_TIMEOUT_S)))
    gpu_apps["elapsed_s"] = round(time.monotonic() - asked, 3)
    holders: Dict[int, List[Dict[str, Any]]] = {}
    for app in gpu_apps["apps"]:
        holders.setdefault(app["pid"], []).append(
            {"uuid": app["gpu_uuid"], "used_memory_mib": app["used_memory_mib"]}
        )
    for process in everyone:
        process["gpus"] = holders.get(process["pid"], [])
    return gpu_apps


def ask_ras(
    processes: List[Dict[str, Any]], everyone: List[Dict[str, Any]], options: Dict[str, Any]
) -> List[Dict[str, Any]]:
    """Each RAS endpoint once (the default, those asked for, every process's NCCL_RAS_ADDR), within
    one budget: its outcome with every attempt."""
    settings = _options(options)
    endpoints = [RAS_DEFAULT, *_string_list(options.get("ras_endpoints"))]
    endpoints += sorted({p["ras_endpoint"] for p in processes if p["ras_endpoint"]})
    deadline = time.monotonic() + settings["budget_s"]
    keep = bool(options.get("transcripts"))
    outcomes: List[Dict[str, Any]] = []
    for endpoint in sorted(set(endpoints), key=endpoints.index):
        listeners = [
            p
            for p in everyone
            if p["ras_endpoint"] == endpoint
            and (p["ras_listener"] or (p["listening"] is None and p["nccl_threads"]))
        ]
        transcripts: Optional[List[str]] = [] if keep else None
        outcome = query_endpoint(endpoint, listeners, settings, deadline, transcripts)
        if transcripts is not None:
            outcome["transcripts"] = transcripts
        outcomes.append(outcome)
    return outcomes


def _problems(
    everyone: List[Dict[str, Any]],
    communicators: List[Dict[str, Any]],
    outcomes: List[Dict[str, Any]],
) -> Dict[str, Any]:
    """What is wrong, from RAS's word and from /proc: each kind as a list of sentences, or None
    where it could not be judged (see _job_problems.problems)."""
    found: Dict[str, Any] = problems(
        everyone, communicators, _text_reports(outcomes), uncovered_processes(everyone, outcomes)
    )
    jobs = jobs_of(everyone)
    found["shared_ras_ports"] = shared_ras_ports(everyone, jobs)
    found["nccl_versions_differ"] = nccl_versions_differ(jobs)
    return found


def _text_reports(outcomes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [
        a["report"]
        for o in outcomes
        for a in o["attempts"]
        if a.get("report") and a["report"]["format"] == "text"
    ]


def _scan_figures(scan: Scan, libraries: Libraries, clock: Dict[str, float]) -> Dict[str, Any]:
    """What the probe read and how long each part took."""
    return {
        "proc_entries": scan.entries,
        "maps_bytes": scan.maps_bytes,
        "library_bytes_read": libraries.bytes_read,
        "library_read_s": round(libraries.seconds, 3),
        "scan_s": round(clock["scanned"] - clock["started"], 3),
        "describe_s": round(clock["described"] - clock["scanned"], 3),
        "ras_s": round(time.monotonic() - clock["described"], 3),
        "total_s": round(time.monotonic() - clock["started"], 3),
    }


if __name__ == "__main__":
    del sys.path[0]  # like every probe: never import a module from probes/ by accident
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
