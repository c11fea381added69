"""NCCL RAS status reports, parsed: the JSON report (NCCL 2.28.7 on) and the text report (every
version), each communicator with what is wrong with it.

Not a probe (the leading underscore): probes/live.py lists it in its `SHIPS` (imported by
_ras_client.py and the probe). Stdlib only, Python 3.8.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

# ncclResult_t: 0 ncclSuccess, 7 ncclInProgress; anything else is an error.
NCCL_RESULTS = {
    0: "success",
    1: "unhandled CUDA error",
    2: "system error",
    3: "internal error",
    4: "invalid argument",
    5: "invalid usage",
    6: "remote error",
    7: "in progress",
}
NOT_AN_ERROR = (0, 7)
EXCERPT_CHARS = 80


# NCCL 2.28.7 to 2.28.9 print each entry of a communicator's `missing_ranks` with no comma after
# `"nvml_dev": N` (src/ras/client_support.cc, jsonWriteMissingRank: `"nvml_dev": %d\n` then
# `"status": {`; fixed in 2.29.2), so their JSON is malformed exactly when a rank is missing. This
# matches only that: an `"nvml_dev": N` line with nothing after the number, followed by the lines
# that open a missing rank's `"status"` object (its first key `"unresponsive"`, which the ranks'
# own status objects do not have). Nothing else is rewritten.
MISSING_RANK_COMMA = re.compile(
    r'^(\s*"nvml_dev": -?\d+)(\r?\n\s*"status": \{\r?\n\s*"unresponsive": )', re.MULTILINE
)
REPAIRED_NOTE = "NCCL 2.28.7-2.28.9 missing_ranks: %d missing comma(s) after nvml_dev restored"


def repair_missing_rank_commas(text: str) -> Tuple[str, int]:
    """The JSON report with the comma NCCL 2.28.7-2.28.9 leave out after each missing rank's
    `"nvml_dev": N` put back, and how many were put back (0: the text is returned unchanged)."""
    return MISSING_RANK_COMMA.subn(r"\1,\2", text)


def parse_json_report(text: str) -> Dict[str, Any]:
    """VERBOSE STATUS after `SET FORMAT json` -> the report, each communicator with its findings
    (see communicator_findings); `repaired` says when NCCL's known missing-rank defect was
    repaired first. Raises ValueError when it is not NCCL's JSON, even so."""
    text, repaired = repair_missing_rank_commas(text)
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("communicators"), list):
        raise ValueError("JSON without a communicators list")
    ras: Dict[str, Any] = document["ras"] if isinstance(document.get("ras"), dict) else {}
    communicators = [
        communicator_findings(comm) for comm in document["communicators"] if isinstance(comm, dict)
    ]
    return {
        "format": "json",
        "nccl_version": document.get("nccl_version"),
        "cuda_runtime_version": document.get("cuda_runtime_version"),
        "cuda_driver_version": document.get("cuda_driver_version"),
        "timestamp": document.get("timestamp"),
        "collection_time_s": ras.get("collection_time_sec"),
        "timeouts_count": ras.get("timeouts_count"),
        "communicators": communicators,
        **({"repaired": REPAIRED_NOTE % repaired} if repaired else {}),
    }


def communicator_findings(comm: Dict[str, Any]) -> Dict[str, Any]:
    """One communicator of the JSON report, as NCCL gave it, plus what its text report would say:
    status (RUNNING, INIT, FINALIZE, ABORT, or several joined by '+'), the ranks with an
    initialisation or asynchronous error, and the collective counts that differ between ranks
    (count_ranges {op: [min, max]}; lagging_ranks: ranks below the maximum of such an op)."""
    ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
    missing = [r for r in comm.get("missing_ranks") or [] if isinstance(r, dict)]
    statuses = sorted({_rank_status(r.get("status") or {}) for r in ranks})
    ranges: Dict[str, List[int]] = {}
    for op in sorted({op for r in ranks for op in (r.get("collective_counts") or {})}):
        counts = [(r.get("collective_counts") or {}).get(op) for r in ranks]
        numbers = [c for c in counts if isinstance(c, int)]
        if numbers and min(numbers) != max(numbers):
            ranges[op] = [min(numbers), max(numbers)]
    lagging = sorted(
        {
            r.get("rank")
            for r in ranks
            for op, (_, high) in ranges.items()
            if (r.get("collective_counts") or {}).get(op, high) < high
        },
        key=lambda rank: (rank is None, rank),
    )
    return {
        "hash": comm.get("hash"),
        "size": comm.get("size"),
        "ranks_count": comm.get("ranks_count"),
        "missing_ranks_count": comm.get("missing_ranks_count"),
        "status": "+".join(statuses) if statuses else None,
        "ranks": ranks,
        "missing_ranks": missing,
        "init_error_ranks": _error_ranks(ranks, "init_state"),
        "async_error_ranks": _error_ranks(ranks, "async_error"),
        "counts_differ": bool(ranges),
        "count_ranges": ranges,
        "lagging_ranks": lagging,
    }


def _rank_status(status: Dict[str, Any]) -> str:
    """NCCL's own order (client_support.cc): abort, then finalize/destroy, then init state."""
    if status.get("abort_flag"):
        return "ABORT"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "FINALIZE"
    return "RUNNING" if status.get("init_state") == 0 else "INIT"


def _error_ranks(ranks: List[Dict[str, Any]], field: str) -> List[Dict[str, Any]]:
    found = []
    for rank in ranks:
        code = (rank.get("status") or {}).get(field)
        if isinstance(code, int) and code not in NOT_AN_ERROR:
            found.append(
                {
                    "rank": rank.get("rank"),
                    "host": rank.get("host"),
                    "pid": rank.get("pid"),
                    "cuda_dev": rank.get("cuda_dev"),
                    "code": code,
                    "error": NCCL_RESULTS.get(code, "error %d" % code),
                }
            )
    return found


TEXT_VERSION = re.compile(r"^NCCL version (\S+) compiled with CUDA (\S+)")
TEXT_CUDA = re.compile(r"^CUDA runtime version (-?\d+), driver version (-?\d+)")
TEXT_COMMS = re.compile(r"^Communicators\.\.\.(?: \((\d+(?:\.\d+)?)s\))?")
TEXT_GROUP = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$"
)
TEXT_BLOCK = re.compile(r"^(?:#(\d+)-(\d+) \(([0-9a-f]+)\) )?([A-Z]+)$")
TEXT_RANK = re.compile(
    r"^\s*Rank (\d+)(?: (has status \S+|reported .+?|has launched up to operation \d+"
    r"|has not launched any operations))? -- (?:GPU (\S+)(?: \(NVML \d+\))? managed by process "
    r"(\d+) on node (\S+)|\[process information not found\])"
)
TEXT_PROCESS = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? (.+)$")
TEXT_SECTIONS = ("Job summary", "Communicators", "Errors", "Warnings")


def parse_text_report(text: str) -> Dict[str, Any]:
    """STATUS (the text report) -> version, job summary, communicator groups, and each block of
    its Errors and Warnings sections with the ranks and processes it names."""
    report: Dict[str, Any] = {
        "format": "text",
        "nccl_version": None,
        "cuda_compiled": None,
        "cuda_runtime_version": None,
        "cuda_driver_version": None,
        "job": {},
        "collection_time_s": None,
        "groups": [],
        "errors": [],
        "warnings": [],
        "complete": False,
    }
    sections = _text_sections(text.splitlines())
    for line in sections.get("", []):
        version, cuda = TEXT_VERSION.match(line), TEXT_CUDA.match(line)
        if version:
            report["nccl_version"], report["cuda_compiled"] = version.groups()
        elif cuda:
            report["cuda_runtime_version"] = int(cuda.group(1))
            report["cuda_driver_version"] = int(cuda.group(2))
    report["job"] = _job_summary(sections.get("Job summary", []))
    for line in sections.get("Communicators", []):
        timing = TEXT_COMMS.match(line)
        group = TEXT_GROUP.match(line)
        if timing and timing.group(1):
            report["collection_time_s"] = float(timing.group(1))
        elif group:
            report["groups"].append(_group(group.groups()))
    report["errors"] = _blocks(sections.get("Errors", []))
    report["warnings"] = _blocks(sections.get("Warnings", []))
    report["complete"] = "Warnings" in sections  # the last section: the report came whole
    return report


def is_nccl_text(report: Dict[str, Any]) -> bool:
    """Whether a parsed text report holds anything NCCL writes: its version line or one of its
    sections (a report that stopped short still has its first lines; garbage has none)."""
    return bool(report["nccl_version"] or report["job"] or report["groups"] or report["complete"])


def _text_sections(lines: List[str]) -> Dict[str, List[str]]:
    """Lines by section: a title line underlined with '=' opens one ("" holds what comes first).
    The Communicators title keeps its own line (it carries the collection time)."""
    sections: Dict[str, List[str]] = {"": []}
    current = ""
    for i, line in enumerate(lines):
        underlined = i + 1 < len(lines) and re.match(r"^=+$", lines[i + 1].strip() or "-")
        title = next((t for t in TEXT_SECTIONS if line.startswith(t)), None)
        if title and (underlined or title == "Communicators"):
            current = title
            sections[current] = [line] if title == "Communicators" else []
            continue
        if re.match(r"^=+$", line.strip() or "-"):
            continue
        sections[current].append(line)
    return sections


def _job_summary(lines: List[str]) -> Dict[str, Any]:
    """The job summary table: the consistent form has one row of 5 numbers; the others end with
    a totals block headed `(total)    (total)      (total)`."""
    rows = [[int(n) for n in line.split()] for line in lines if re.match(r"^[\s\d]+$", line)]
    rows = [row for row in rows if row]
    summary: Dict[str, Any] = {}
    five = next((row for row in rows if len(row) == 5), None)
    if five:
        keys = ("nodes", "processes_per_node", "gpus_per_process", "processes", "gpus")
        return dict(zip(keys, five))
    totals = [row for row in rows if len(row) == 3]
    if totals:
        summary.update(zip(("nodes", "processes", "gpus"), totals[-1]))
    return summary


def _group(cells: Tuple[str, ...]) -> Dict[str, Any]:
    keys = ("group", "comms", "nodes_per_comm", "ranks_per_node", "ranks_per_comm")
    group: Dict[str, Any] = {k: int(v) if v.isdigit() else v for k, v in zip(keys, cells)}
    group.update(ranks_in_group=int(cells[5]), status=cells[6], errors=cells[7])
    return group


def _blocks(lines: List[str]) -> List[Dict[str, Any]]:
    """The blocks of an Errors or Warnings section: a title line (`INCOMPLETE`, `DEAD`, `TIMEOUT`,
    `#0-0 (44d8c595d392cba8) MISMATCH`), then indented lines naming ranks and processes."""
    blocks: List[Dict[str, Any]] = []
    block: Optional[Dict[str, Any]] = None
    part = None
    for line in lines:
        if not line.strip():
            block = None
            continue
        title = TEXT_BLOCK.match(line.strip()) if not line.startswith(" ") else None
        if title:
            block = {
                "kind": title.group(4),
                "comm": "0x" + (title.group(3).lstrip("0") or "0") if title.group(3) else None,
                "lines": [],
                "ranks": [],
                "processes": [],
            }
            blocks.append(block)
            part = None
            continue
        if block is None:
            continue
        block["lines"].append(line.strip())
        part = _part_of(line, part)
        rank, process = TEXT_RANK.match(line), TEXT_PROCESS.match(line)
        if rank:
            number, detail, gpu, pid, host = rank.groups()
            block["ranks"].append(
                {
                    "rank": int(number),
                    "detail": detail or part,
                    "gpu": gpu,
                    "pid": int(pid) if pid else None,
                    "host": host,
                }
            )
        elif process:
            block["processes"].append(
                {"pid": int(process.group(1)), "host": process.group(2), "gpus": process.group(3)}
            )
    return blocks


def _part_of(line: str, part: Optional[str]) -> Optional[str]:
    """Which sub-list of a block the rank lines below belong to (an ERROR block lists the
    initialisation errors, then the asynchronous ones; a MISMATCH block each op in turn)."""
    text = line.strip()
    if text.startswith("Initialization error"):
        return "initialization error"
    if text.startswith("Asynchronous error"):
        return "asynchronous error"
    counts = re.match(r"^Communicator ranks have different (\w+) operation counts", text)
    if counts:
        return "different %s counts" % counts.group(1)
    if text.startswith("Communicator ranks have different status"):
        return "different status"
    return part


def excerpt(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "...")


def pids_in(report: Optional[Dict[str, Any]]) -> set:
    """Pids a report names, as ranks or missing ranks (JSON), or in its blocks (text)."""
    pids = set()
    for comm in (report or {}).get("communicators") or []:
        for rank in (comm.get("ranks") or []) + (comm.get("missing_ranks") or []):
            pids.add(rank.get("pid"))
    for block in ((report or {}).get("errors") or []) + ((report or {}).get("warnings") or []):
        pids |= {item.get("pid") for item in block["ranks"] + block["processes"]}
    return pids
