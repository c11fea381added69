"""What the live probe finds wrong with the NCCL jobs joined across hosts (fleet/units/live/
facts.py): read by fleet.findings.sources.unit_findings with every other source, so `fleet probe`,
`fleet check` and `fleet report` say it as findings; `fleet jobs` shows each rank."""

from __future__ import annotations

from collections.abc import Iterable

from fleet.findings.model import SENTENCE, Finding
from fleet.models import Run
from fleet.units.live.facts import TOPIC, Job, live_jobs, ran_live, rank_troubles, rank_where

JOB_FIX = "restart the job (its other ranks wait on this one); fleet jobs shows every rank"


def findings(run: Run) -> list[Finding]:
    """The NCCL jobs of `run` (facts.py): a dead, stopped or missing rank on
    its host (error, restart-app), a job whose ranks mapped different libnccl builds (error,
    fix-config), two jobs sharing one RAS port (warning). Nothing when no host ran `live`."""
    if not ran_live(run):
        return []

    report = live_jobs(run)
    found: list[Finding] = []
    for job in report.jobs:
        found += _rank_findings(job)
        if len(job.libraries) > 1:
            found.append(_mixed_builds(job))
    for line in report.findings:  # a stopped NCCL process that no RAS answer names
        host, _, what = line.partition(": ")
        found.append(_job_finding("error", what, (host,), "restart-app", JOB_FIX))
    for host, ports in report.shared_ras_ports.items():
        fix = "give each job its own port: NCCL_RAS_ADDR=127.0.0.1:PORT"
        found += [_job_finding("warning", line, (host,), "fix-config", fix) for line in ports]
    return found


def _rank_findings(job: Job) -> Iterable[Finding]:
    """One finding per rank that is stopped or missing, every reason said (a stopped process is
    also a rank RAS finds unresponsive)."""
    reasons: dict[int, list[str]] = {}
    ranks = {}
    for rank, kind, why in rank_troubles(job):
        if kind in ("stopped", "missing"):
            reasons.setdefault(rank.rank, []).append(why)
            ranks[rank.rank] = rank
    for number, whys in reasons.items():
        rank = ranks[number]
        host = rank.host or "?"
        yield _job_finding(
            "error",
            f"NCCL job {job.comm}: rank {number} on {host}: {'; '.join(whys)}",
            (host,) if rank.host else job.reported_by,
            "restart-app",
            JOB_FIX,
            where=rank_where(rank),
        )


def _mixed_builds(job: Job) -> Finding:
    versions = ", ".join(job.nccl_versions) or "?"
    return _job_finding(
        "error",
        f"NCCL job {job.comm}: its ranks mapped {len(job.libraries)} libnccl builds "
        f"(NCCL {versions}); RAS peers of different versions refuse each other",
        job.hosts,
        "fix-config",
        "give every host of the job the same NCCL (fleet jobs names each rank's libnccl)",
    )


def _job_finding(
    severity: str, what: str, hosts: tuple[str, ...], action: str, fix: str, where: str = ""
) -> Finding:
    return Finding(
        severity, "job", what, hosts, action, fix, where=where, topic=TOPIC, weight=SENTENCE
    )
