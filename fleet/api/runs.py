"""Runs kept: saved in the runs folder, written as JSON (--json) and as the HTML report; saved runs
found again (`latest`, `previous`, a name, a path), listed and pruned."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.analysis.across_runs.tolerance import DEFAULT_TOLERANCE
from fleet.collector import paused as collection_paused
from fleet.errors import FleetError, StoreError
from fleet.models import Host, HostOutcome, Run, now
from fleet.store import (
    BUILT_IN_LOCAL,
    default_runs_dir,
    parse_duration,
    read_run_file,
    write_run_json,
)
from fleet.store import list_runs as _list_runs
from fleet.store import prune_runs as _prune_runs
from fleet.store import resolve_run as _resolve_run
from fleet.store import save_run as _save_run
from fleet.version import __version__

if TYPE_CHECKING:
    from fleet.analysis.across_hosts.diff import FleetDiff
    from fleet.analysis.across_runs.drift import Drift
    from fleet.analysis.baselines.judge import BaselineJudgement
    from fleet.checks import CheckReport
    from fleet.findings.model import Finding

__all__ = [
    "BUILT_IN_LOCAL",
    "KeptRun",
    "collection_paused",
    "default_runs_dir",
    "keep_run",
    "list_runs",
    "load_run",
    "prune_runs",
    "resolve_run",
    "save_run",
    "write_report",
]


def _folder(runs_dir: str | Path | None) -> Path:
    return Path(runs_dir) if runs_dir else default_runs_dir()


def limited_to(run: Run, limit: str | None) -> Run:
    """`run` with only the hosts `--limit` selects among its own (names, nodesets, globs, `!`
    to leave out; a saved run knows no groups). A pattern that matches none of them is a
    UsageError naming the hosts it has."""
    if not limit:
        return run
    from fleet.inventory import select_names

    names = select_names(list(run.hosts), {}, limit)
    return dataclasses.replace(run, hosts={name: run.hosts[name] for name in names})


def save_run(run: Run, runs_dir: str | Path | None = None) -> Path:
    """Save `run` (atomically, 0600) in the runs folder; returns its path."""
    return _save_run(run, _folder(runs_dir))


def resolve_run(
    ref: str | Path, runs_dir: str | Path | None = None, inventory: str | None = None
) -> Path:
    """The file of a saved run: a file path, a run's name (or unique prefix), `latest` or
    `previous`; `latest:INV`, or `inventory=INV`, counts only the runs of inventory INV."""
    return _resolve_run(str(ref), _folder(runs_dir), inventory)


def assemble_run(
    started: str,
    hosts: Sequence[Host],
    outcomes: Mapping[str, HostOutcome],
    *,
    bundle_sha256: str,
    probes: Sequence[str],
    inventory: str | None,
    interrupted: bool,
    slurm: Mapping[str, Any] | None,
    **recorded: Any,
) -> Run:
    """The one place a Run is made from hosts that answered (fleet probe, fleet fabric): fleet's
    version, the end (now), how the hosts were reached; `recorded`: the rest a kind of run keeps
    (cohort_by, facts, limit; the fabric section)."""
    return Run(
        fleet_version=__version__,
        started=started,
        finished=now(),
        bundle_sha256=bundle_sha256,
        hosts=outcomes,
        probes=tuple(probes),
        inventory=inventory,
        interrupted=interrupted,
        transport=",".join(sorted({h.transport for h in hosts})),
        slurm=slurm,
        **recorded,
    )


def load_run(
    ref: str | Path,
    runs_dir: str | Path | None = None,
    inventory: str | None = None,
    *,
    frozen: bool = False,
) -> Run:
    """A saved run: a file path, a run's name (or unique prefix), `latest` or `previous`;
    `latest:INV`, or `inventory=INV`, counts only the runs of inventory INV. `frozen`: for a
    program that then works on the run until it exits (a command): the run's objects (millions
    at 20,000 hosts) are moved out of the garbage collector's sight (gc.freeze), so that the
    collections its own work sets off do not walk them again and again."""
    run = read_run_file(resolve_run(ref, runs_dir, inventory))
    if frozen:
        gc.freeze()
    return run


def list_runs(runs_dir: str | Path | None = None) -> list[Path]:
    """The saved runs' files, oldest first; none when the folder does not exist."""
    return _list_runs(_folder(runs_dir))


def prune_runs(
    runs_dir: str | Path | None = None,
    *,
    keep: int | None = None,
    older_than: str | float | None = None,
    dry_run: bool = False,
) -> list[Path]:
    """Delete the saved runs beyond the `keep` newest, or older than `older_than` (seconds, or a
    duration: 45m, 12h, 30d, 2w); with both, a run goes when either says so. Returns them (with
    `dry_run`, deletes nothing)."""
    age = parse_duration(older_than) if isinstance(older_than, str) else older_than
    return _prune_runs(_folder(runs_dir), keep, age, dry_run)


@dataclass(frozen=True)
class KeptRun:
    """A run and what became of it: where it was saved (None: not saved) and the errors of the
    saving and writing asked for, in order. None of them stops the run from being shown."""

    run: Run
    saved: Path | None = None
    errors: tuple[FleetError, ...] = ()
    written: tuple[Path, ...] = ()  # the run document's files (json_path), when written

    @property
    def kept(self) -> bool:
        """Whether everything asked for was saved and written."""
        return not self.errors

    @property
    def where(self) -> str:
        """Where the run is, for a title: its file, or when it started when it was not saved."""
        return str(self.saved) if self.saved else f"{self.run.started} (not saved)"


def keep_run(
    run: Run,
    *,
    save: bool = True,
    runs_dir: str | Path | None = None,
    json_path: str | Path | None = None,
) -> KeptRun:
    """Save `run` in the runs folder (unless not `save`) and write its fleet.run/1 document to
    `json_path` (a file, 0600). A failure is collected in KeptRun.errors, never raised: the run
    was probed and can still be shown."""
    errors: list[FleetError] = []
    saved = None
    written: tuple[Path, ...] = ()
    if save:
        try:
            saved = save_run(run, runs_dir)
        except FleetError as exc:
            errors.append(exc)
    if json_path is not None:
        try:
            write_run_json(Path(json_path), run)
            written = (Path(json_path),)
        except OSError as exc:
            errors.append(StoreError(f"cannot write {json_path}: {exc.strerror}"))
    return KeptRun(run, saved, tuple(errors), written)


def write_report(
    run: Run,
    path: str | Path,
    *,
    diff: FleetDiff | None = None,
    drift: Drift | None = None,
    checks: CheckReport | None = None,
    exit_code: int | None = None,
    source: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    probe_dirs: Sequence[str | Path] = (),
    baseline: BaselineJudgement | None = None,
    findings: Sequence[Finding] = (),
) -> Path:
    """Write the one-page HTML report of `run` (its cross-host diff, computed here with
    `tolerance` and `probe_dirs` when not given; the drift, verdicts, exit code and source
    shown when given; a baseline's bands drawn behind the allreduce curves when the run was
    judged against one); returns the file written. ReportError when it cannot be written."""
    from fleet.render.html.page import Report, fabric_of, write_html  # only when asked

    if diff is None:
        from fleet.api.comparing import cross_host_diff  # the analysis: only for a report

        diff = cross_host_diff(run, tolerance, probe_dirs)
    page = Report(
        run,
        diff,
        drift=drift,
        checks=checks,
        fabric=fabric_of(run),
        exit_code=exit_code,
        source=source,
        baseline=baseline,
        findings=findings,
    )
    return write_html(page, Path(path))
