"""The report's NCCL jobs section, as `fleet jobs` says it: one table row per rank of every job
the live probe's RAS answers name (job, rank, host, pid, GPU, state, NCCL, libnccl), jobs with a
stopped, missing or failing rank first; then what is wrong, each line with its host first, and
the hosts whose jobs could not be judged. The verdicts stay in the findings and checks sections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.render.html.markup import esc, row, table
from fleet.units.live.facts import Job, LiveReport, Rank, live_jobs, rank_state, rank_troubles

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "jobs"
NAV = "NCCL jobs"
TITLE = "NCCL jobs"
INTRO = "every NCCL job the live probe found, its ranks joined across hosts (fleet jobs)"
HEADERS = ["job", "rank", "host", "pid", "GPU", "state", "NCCL", "libnccl"]


def shown(report: Report) -> bool:
    return any("live" in outcome.probes for outcome in report.run.hosts.values())


def body(report: Report) -> str | None:
    if not shown(report):
        return None
    return jobs_section(live_jobs(report.run))


def jobs_section(report: LiveReport) -> str:
    ordered = sorted(report.jobs, key=lambda job: (not job.findings, job.comm))
    rows = [_rank_row(job, rank) for job in ordered for rank in job.ranks]
    parts = [table(HEADERS, rows)] if rows else ['<p class="ok">no NCCL job</p>']
    lines = [
        f"{rank.host or '?'}: rank {rank.rank} of {job.comm}: {why}"
        for job in ordered
        for rank, _, why in rank_troubles(job)
    ]
    lines += [
        f"{job.comm}: {finding}"
        for job in ordered
        for finding in job.findings
        if finding.startswith("ranks ")
    ]
    lines += list(report.findings)
    lines += [
        f"{host}: {line}" for host, ports in report.shared_ras_ports.items() for line in ports
    ]
    lines += [
        f"{host}: not judged: {why}" for host, whys in report.not_judged.items() for why in whys
    ]
    if lines:
        items = "".join(f"<li>{esc(line)}</li>" for line in lines)
        parts.append(f"<ul>{items}</ul>")
    return "".join(parts)


def _rank_row(job: Job, rank: Rank) -> str:
    state = rank_state(rank)
    off = state not in ("RUNNING", "INIT")
    cells = [
        f"<code>{esc(job.comm)}</code>",
        esc(rank.rank),
        esc(rank.host or "?"),
        esc(rank.pid if rank.pid is not None else "?"),
        esc(rank.cuda_dev if rank.cuda_dev is not None else "?"),
        f'<span class="{"chip bad" if off else "ok"}">{esc(state)}</span>',
        esc(rank.nccl_version or "?"),
        f"<code>{esc(rank.library or '?')}</code>",
    ]
    return row(cells, key=rank.host or "")
