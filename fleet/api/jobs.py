"""Every NCCL job across a run's hosts (`fleet jobs`): the `live` probe's ranks joined into jobs
by the live unit (fleet/units/live/facts.py), with the run they came from.

    view = fleet.api.jobs("latest")          # a saved run, or a Run just probed
    view.report.jobs[0].hosts                # ("gpu-a", "gpu-b")
    view.to_dict()                           # the fleet.jobs/1 document (jobs.schema.json)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.api.runs import load_run, resolve_run
from fleet.errors import StoreError
from fleet.models import Run
from fleet.store import write_private_json
from fleet.units.live.facts import LiveReport, live_jobs, ran_live

__all__ = ["JobsView", "jobs"]


@dataclass(frozen=True)
class JobsView:
    """The jobs of one run, and which run: where it is (its file, or when it was probed)."""

    report: LiveReport
    where: str
    started: str
    probed_live: bool  # whether any host ran the live probe (a run without it has no jobs to say)

    def to_dict(self) -> dict[str, Any]:
        """The fleet.jobs/1 document: the run it read, then the jobs and what was not judged."""
        document = self.report.as_dict()
        return {
            "schema": document.pop("schema"),
            "run": {"started": self.started, "location": self.where},
            **document,
        }

    def write(self, path: str | Path) -> Path:
        """Write the fleet.jobs/1 document to `path` (0600, atomically, as a run is kept).
        StoreError when it cannot be written."""
        try:
            write_private_json(Path(path), self.to_dict())
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror}") from exc
        return Path(path)


def jobs(
    run: Run | str | Path,
    *,
    where: str | None = None,
    runs_dir: str | Path | None = None,
    inventory: str | None = None,
) -> JobsView:
    """The NCCL jobs of `run`: a Run (just probed; `where` says where it was kept), or a saved
    run's reference (a path, a name, `latest`, `previous`; `inventory` scopes latest/previous,
    as `load_run`). Raises StoreError for a reference that names no readable run."""
    if not isinstance(run, Run):
        path = resolve_run(run, runs_dir, inventory)
        where, run = str(path), load_run(path)
    return JobsView(live_jobs(run), where or run.started, run.started, ran_live(run))
