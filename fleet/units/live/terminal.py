"""The live probe in the terminal report (`fleet probe`, `fleet show`): every NCCL job in a few
lines — its state with the troubled host first, hosts, ranks, the libnccl versions its ranks
mapped — and what could not be read; `fleet jobs` gives each job's ranks in full."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import Run
from fleet.render.terminal.jobs import job_state
from fleet.render.terminal.wrap import Hanging
from fleet.units.live.facts import live_jobs

MAX_JOBS = 8  # one line each; past that, counted (fleet jobs lists them all)


def view(run: Run, diff: FleetDiff) -> Group | None:
    """None when no host ran the live probe."""
    if not any("live" in outcome.probes for outcome in run.hosts.values()):
        return None
    report = live_jobs(run)
    lines: list[Hanging] = [_line(f"NCCL jobs: {_count(report.jobs)} on {_hosts(report.hosts)}")]
    ordered = sorted(report.jobs, key=lambda job: (not job.findings, job.comm))
    for job in ordered[:MAX_JOBS]:
        versions = ", ".join(job.nccl_versions or job.ras_nccl_versions) or "?"
        ranks = f"{len(job.ranks)} rank{'s' if len(job.ranks) != 1 else ''}"
        where = compact_hosts(job.hosts) or "?"
        lines.append(
            _line(f"  {job.comm}: {job_state(job)} · {ranks} on {where} · NCCL {versions}")
        )
    if len(ordered) > MAX_JOBS:
        lines.append(_line(f"  … {len(ordered) - MAX_JOBS} more: fleet jobs lists them all"))
    for host, what in sorted(report.not_judged.items()):
        lines.append(_line(f"  not read on {host}: {'; '.join(what)}", style="yellow"))
    return Group(*lines)


def _count(jobs: tuple[object, ...]) -> str:
    return f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}" if jobs else "none"


def _hosts(hosts: tuple[str, ...]) -> str:
    return compact_hosts(hosts) if hosts else "no host"


def _line(text: str, style: str = "") -> Hanging:
    lead = len(text) - len(text.lstrip(" "))
    return Hanging(Text(text[:lead]), Text(text[lead:], style=style), lead + 4)
