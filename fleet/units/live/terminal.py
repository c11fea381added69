"""The live probe in the terminal. In the report (`fleet probe`, `fleet show`): every NCCL job in a
few lines — its state with the troubled host first, hosts, ranks, the libnccl versions its ranks
mapped — and what could not be read (`view`). `fleet probe` and `fleet check` speak of what is
wrong with the jobs through their findings (fleet/units/live/findings.py).

`fleet jobs` (`render_jobs`): every NCCL job across the hosts, as the live unit joined them
(fleet/units/live/facts.py). First one line per job (its communicator, hosts, ranks, NCCL, and
what is wrong, the host named first), then each job in detail: one row per rank (rank, host, pid,
GPU, process state, RAS status, the libnccl it mapped) and each stopped, missing, failing or
lagging rank as `HOST: rank R pid P GPU G: why`; then what could not be judged. Tables fit 80
columns (fleet/render/terminal/tables.py): ids and paths stay whole, and a column left out is
named.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.markup import escape as _esc
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts
from fleet.models import Run
from fleet.render.terminal.tables import Column, print_table
from fleet.render.terminal.wrap import Hanging, say
from fleet.units.live.facts import (
    Job,
    LiveReport,
    Rank,
    live_jobs,
    rank_state,
    rank_troubles,
    rank_where,
)

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


# -------------------------------------------------------------------------------------- fleet jobs

SUMMARY_COLUMNS = (
    Column("job", whole=True),
    Column("state", keep=4),
    Column("hosts", keep=3),
    Column("ranks", keep=2, justify="right"),
    Column("NCCL", keep=1),
)
RANK_COLUMNS = (
    Column("rank", justify="right"),
    Column("host", whole=True, keep=6),
    Column("pid", keep=5, justify="right"),
    Column("GPU", keep=4, justify="right"),
    Column("state", keep=5),
    Column("NCCL", keep=2),
)


def render_jobs(console: Console, report: LiveReport, where: str, probed_live: bool) -> None:
    """`fleet jobs`: the one-line summaries, each job's ranks, what was not judged."""
    console.print(Text(f"NCCL jobs in {where}", style="bold"), soft_wrap=True)
    if not probed_live:
        say(console, "  the live probe did not run here: no jobs to show (fleet jobs probes it)", 4)
        return
    ordered = sorted(report.jobs, key=lambda job: (not job.findings, job.comm))  # trouble first
    if ordered:
        print_table(console, "", SUMMARY_COLUMNS, [_summary_row(job) for job in ordered])
    else:
        say(console, f"  no NCCL job on {compact_hosts(report.hosts)}", 4)
    for job in ordered:
        _render_job(console, job)
    _render_outside(console, report)


def job_state(job: Job) -> str:
    """`ok`, or the first trouble with its host first (`gpu-b: rank 1 missing`) and how many."""
    troubles = rank_troubles(job)
    if troubles:
        rank, kind, _ = troubles[0]
        more = f" (+{len(job.findings) - 1})" if len(job.findings) > 1 else ""
        return f"{rank.host or '?'}: rank {rank.rank} {kind}{more}"
    if job.findings:
        return job.findings[0].split(":")[0]
    return "ok"


def _summary_row(job: Job) -> tuple[str | Text, ...]:
    state = job_state(job)
    return (
        job.comm,
        Text(state, style="red" if state != "ok" else "green"),
        compact_hosts(job.hosts) or "?",
        f"{len(job.ranks)}" + (f"/{job.size}" if job.size and job.size != len(job.ranks) else ""),
        ", ".join(job.nccl_versions or job.ras_nccl_versions) or "?",
    )


def _render_job(console: Console, job: Job) -> None:
    console.print()
    reporters = compact_hosts(job.reported_by)
    ranks = f"{len(job.ranks)} rank{'s' if len(job.ranks) != 1 else ''}"
    title = f"job {job.comm}: {ranks} on {compact_hosts(job.hosts) or '?'}"
    print_table(console, f"{title} (RAS of {reporters})", RANK_COLUMNS, _rank_rows(job.ranks))
    for line in libraries(job.ranks):
        say(console, f"  {_esc(line)}", 6)
    for rank, _, why in rank_troubles(job):
        say(console, f"  [red]{_esc(rank.host or '?')}[/]: {_esc(rank_where(rank))}: {why}", 6)
    others = [f for f in job.findings if f.startswith("ranks ")]  # builds, states: job-wide
    for finding in others:
        say(console, f"  [red]{_esc(finding)}[/]", 6)
    if job.blame is not None and len(job.findings) > 1:  # one trouble: said above already
        say(console, f"  look first at {_esc(job.blame.host or '?')}: {_esc(job.blame.reason)}", 6)


def libraries(ranks: Sequence[Rank]) -> list[str]:
    """`libnccl PATH (NCCL V, build B): ranks R…` for each libnccl the ranks mapped: a path is
    as long as a line, so it has a line of its own, never a column that 80 columns leave out."""
    using: dict[tuple[str, str, str], list[int]] = {}
    for rank in ranks:
        if rank.library:
            key = (rank.library, rank.nccl_version or "?", (rank.build_id or "")[:12])
            using.setdefault(key, []).append(rank.rank)
    return [
        f"libnccl {path} (NCCL {version}"
        + (f", build {build}" if build else "")
        + f"): rank{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"
        for (path, version, build), numbers in using.items()
    ]


def _rank_rows(ranks: Sequence[Rank]) -> list[tuple[str | Text, ...]]:
    rows: list[tuple[str | Text, ...]] = []
    for rank in ranks:
        state = rank_state(rank)
        rows.append(
            (
                str(rank.rank),
                rank.host or "?",
                str(rank.pid) if rank.pid is not None else "?",
                str(rank.cuda_dev) if rank.cuda_dev is not None else "?",
                Text(state, style="" if state in ("RUNNING", "INIT") else "red"),
                rank.nccl_version or "?",
            )
        )
    return rows


def _render_outside(console: Console, report: LiveReport) -> None:
    """NCCL processes no job names, RAS ports two jobs share, hosts not judged."""
    lines = [f"[red]{_esc(line)}[/]" for line in report.findings]
    for host, ports in report.shared_ras_ports.items():
        lines += [f"[yellow]{_esc(host)}[/]: {_esc(line)}" for line in ports]
    stopped = set(report.findings)
    for host, processes in report.unjoined.items():
        lines += [
            f"{_esc(host)}: {_esc(p)}, in no job"
            for p in processes
            if f"{host}: {p}" not in stopped
        ]
    for host, why in report.not_judged.items():
        lines += [f"[yellow]{_esc(host)}[/]: not judged: {_esc(line)}" for line in why]
    if lines:
        console.print()
    for line in lines:
        say(console, line, 4)
