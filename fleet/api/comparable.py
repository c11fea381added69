"""Which saved run `--baseline latest` (or `previous`) means: the newest run that can be
compared like with like with the run judged. A run narrowed by `--limit` or `-p` is no baseline
for a whole run: compared with it, a change on the hosts or probes it left out would read as
"none". So the runs of the same inventory are looked at newest first and the first whose hosts
and probes cover the judged run's is taken; the newer ones passed over are said (the drift's
`baseline_chosen`). When none covers them, the plain latest is taken and the drift says what it
could not compare. A run is never its own baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleet.errors import StoreError
from fleet.hostsets import compact_hosts
from fleet.models import Run

LOOKED_AT = 20  # saved runs read, newest first, in search of one that covers the judged run


@dataclass(frozen=True)
class Covering:
    """What a baseline must cover: the judged run's hosts, probes and inventory; `itself`, its
    own file when it is saved (never its own baseline)."""

    hosts: frozenset[str]
    probes: frozenset[str]
    inventory: str | None = None
    itself: Path | None = None

    @classmethod
    def of(cls, run: Run, itself: str | Path | None = None) -> Covering:
        path = Path(itself) if itself is not None and Path(itself).is_file() else None
        return cls(frozenset(run.hosts), frozenset(run.probes), run.inventory, path)

    def covered_by(self, run: Run) -> bool:
        probes = set(run.probes) or {p for outcome in run.hosts.values() for p in outcome.probes}
        return self.hosts <= set(run.hosts) and self.probes <= probes


def choose_baseline(
    ref: str, runs_dir: Path | None, scope: str | None, covering: Covering
) -> tuple[Run, str]:
    """The run `--baseline REF` names, loaded, and a sentence when it is not simply REF's run:
    for latest/previous, the newest (second newest) run of the judged run's inventory that
    covers its hosts and probes (fleet/api/comparable.py). The store's modules load here, on
    the first --baseline: a run judged without one needs none of them."""
    from fleet.store import alias_runs, default_runs_dir, no_alias_run, read_run_file, resolve_run

    folder = runs_dir or default_runs_dir()
    counted = alias_runs(ref, folder, scope or covering.inventory)
    if counted is None:
        return read_run_file(resolve_run(ref, folder, scope)), ""
    back, runs = counted
    runs = [path for path in runs if not _same_file(path, covering.itself)]
    if len(runs) < back:
        raise no_alias_run(ref, folder, scope or covering.inventory)
    found, passed = _covering_runs(runs, back, covering)
    if found is None:
        what = f"{compact_hosts(covering.hosts)} and probes {', '.join(sorted(covering.probes))}"
        note = f"no saved run of the last {LOOKED_AT} covers {what}: compared with {ref}"
        return read_run_file(runs[-back]), note
    path, run = found
    if not passed:
        return run, ""
    newer = f"{passed} newer run(s) of fewer hosts (--limit) or probes (-p) passed over"
    return run, f"baseline {path.stem}: the {ref} run covering these hosts and probes; {newer}"


def _covering_runs(
    runs: list[Path], back: int, covering: Covering
) -> tuple[tuple[Path, Run] | None, int]:
    """The `back`-th newest run that covers `covering` (None: none of the last LOOKED_AT), and
    how many newer runs did not."""
    from fleet.store import read_run_file

    seen, passed = 0, 0
    for path in reversed(runs[-LOOKED_AT:]):
        try:
            run = read_run_file(path)
        except StoreError:
            passed += 1  # unreadable: no baseline (`fleet runs` names why)
            continue
        if not covering.covered_by(run):
            passed += 1
            continue
        seen += 1
        if seen == back:
            return (path, run), passed
    return None, passed


def _same_file(path: Path, other: Path | None) -> bool:
    return other is not None and path.resolve() == other.resolve()
