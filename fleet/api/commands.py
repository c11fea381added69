"""One call per command: what `fleet probe`, `fleet check`, `fleet show`, `fleet diff`,
`fleet report` and `fleet runs` do, each returning a result that carries its documents and exit
bits, so that the CLI parses options, calls one, prints and exits.

    plan = ProbePlan.make(Judging(rules=True), ProbeOptions(probes=["system"]), select)
    probed = asyncio.run(plan.run())            # probed.assessment, probed.kept
    assessment = assess_run(load_run("latest"), Judging(rules=True), "latest")
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.api.comparable import Covering
from fleet.api.judging import Judging, Prepared, RulesLater, prepare, with_baseline_run
from fleet.api.probing import ProbeOptions, build_probe_bundle, probe_and_keep_async
from fleet.collector import paused as collection_paused
from fleet.errors import StoreError
from fleet.execution.fanout import Events
from fleet.execution.limits import early_seed_workers
from fleet.exits import exit_code, kept_bits, with_bits
from fleet.models import Host, HostOutcome, Run
from fleet.registry import declared

if TYPE_CHECKING:
    from fleet.api.hosts import Selection
    from fleet.api.runs import KeptRun
    from fleet.checks import Probing
    from fleet.execution.bundle import Bundle
    from fleet.execution.limits import FanLimits
    from fleet.execution.workers import SeedProcess
    from fleet.findings.assessment import Assessment

log = logging.getLogger(__name__)

__all__ = ["ProbePlan", "Probed", "RunSummary", "SavedRuns", "assess_run", "saved_runs"]

RUNS_SCHEMA = "fleet.runs/1"


@dataclass(frozen=True)
class Probed:
    """A probe run judged (`assessment`, its exit bits those of probing, keeping and judging)
    and what became of it (`kept`: where it was saved, what could not be written)."""

    assessment: Assessment
    kept: KeptRun
    hosts: tuple[Host, ...] = ()  # the hosts selected (their settings: slurm_node, …)


@dataclass(frozen=True)
class ProbePlan:
    """What `fleet probe` / `fleet check` will do, read and checked before any host is contacted:
    the judging's inputs (rules, a baseline file, the run to drift against), the hosts, the
    bundle. `run` probes, keeps and judges."""

    judging: Judging
    prepared: Prepared
    selection: Selection
    bundle: Bundle
    options: ProbeOptions
    notes: tuple[str, ...] = ()  # what the rules files' `probing:` chose, a line each
    later: RulesLater | None = None  # the default pack, read while the hosts work

    @classmethod
    def make(
        cls,
        judging: Judging,
        options: ProbeOptions,
        select: Callable[[], Selection],
        inventory_file: str | Path | None = None,
        limit: str | None = None,
    ) -> ProbePlan:
        """Read what judging needs (a bad rules or baseline file fails first), then `select` the
        hosts and build the bundle (bad probe names fail before any host is contacted). The
        default pack alone cannot be wrong: it is read once the hosts run (RulesLater).
        `inventory_file` (with `limit`): the file `select` reads, if it reads one; for a big one
        the workers' seed is started before it is read (ProbeOptions.seed), so the two overlap."""
        later = RulesLater.applies(judging)
        now = dataclasses.replace(judging, baseline_run=None, rules=judging.rules and not later)
        prepared = prepare(now)  # the run to drift against: below, once the hosts are known
        options, notes = with_rules_probing(options, prepared.probing)
        options = dataclasses.replace(options, seed=_seed_early(inventory_file, limit, options))
        try:
            selection = select()
            bundle = build_probe_bundle(options)
        except BaseException:
            if options.seed is not None:
                options.seed.discard()
            raise
        rules_later = RulesLater(judging, bundle.probes) if later else None
        names = frozenset(host.name for host in selection.hosts)
        covering = Covering(names, frozenset(bundle.probes), selection.source)
        prepared = with_baseline_run(prepared, judging, covering)  # the run to drift against
        return cls(judging, prepared, selection, bundle, options, notes, rules_later)

    @property
    def host_count(self) -> int:
        return len(self.selection.hosts)

    @property
    def probes(self) -> list[str]:
        return list(self.bundle.probes)

    @property
    def warnings(self) -> tuple[str, ...]:
        """A broken probe file that was not chosen, one line each."""
        return tuple(self.bundle.warnings)

    async def run(
        self,
        events: Events | None = None,
        interrupt: asyncio.Event | None = None,
        *,
        save: bool = True,
        runs_dir: str | Path | None = None,
        json_path: str | Path | None = None,
    ) -> Probed:
        """Probe, keep (save, the run document to `json_path`) and judge. An interrupted run
        is kept and judged too: what finished is in it."""
        if self.later is not None:
            events = StartingOnRunning(events or Events(), self.later.start)
        try:
            kept = await probe_and_keep_async(
                self.selection,
                self.bundle,
                self.options,
                events,
                interrupt,
                save=save,
                runs_dir=runs_dir,
                json_path=json_path,
            )
        finally:
            if self.options.seed is not None:
                self.options.seed.discard()  # a no-op once the run's workers were forked from it
        probed_code = with_bits(exit_code(kept.run), kept_bits(kept.kept))
        prepared = self.later.joined(self.prepared) if self.later else self.prepared
        from fleet.api.assessing import assess  # imported by `later` meanwhile, if there is one

        with collection_paused():  # judging makes many objects and next to no garbage
            assessment = assess(kept.run, self.judging, prepared, kept.where, probed_code)
        return Probed(assessment, kept, tuple(self.selection.hosts))


def _seed_early(
    inventory_file: str | Path | None, limit: str | None, options: ProbeOptions
) -> SeedProcess | None:
    """The workers' seed for a run whose hosts a big inventory file names (limits.py
    early_seed_workers decides, so that any other run loads no worker module)."""
    most = early_seed_workers(inventory_file, limit, options.workers)
    if most is None:
        return None
    from fleet.execution.workers import SeedProcess

    try:
        seed = SeedProcess(most)
    except OSError as exc:  # no process or pipe to spare now: the run starts its seed later
        log.debug("the workers' seed could not start early: %s", exc)
        return None
    log.debug("the workers' seed started before the inventory is read (pid %d)", seed.process.pid)
    return seed


class StartingOnRunning(Events):
    """`inner`'s events, and `start` called once, when the first host is running."""

    def __init__(self, inner: Events, start: Callable[[], object]) -> None:
        self.inner, self.start = inner, start

    def run_planned(self, limits: FanLimits) -> None:
        self.inner.run_planned(limits)

    def host_connecting(self, host: Host) -> None:
        self.inner.host_connecting(host)

    def host_running(self, host: Host) -> None:
        self.inner.host_running(host)
        start, self.start = self.start, lambda: None
        start()

    def probes_running(self, host: Host, probes: Sequence[str]) -> None:
        self.inner.probes_running(host, probes)

    def probe_finished(self, host: Host, probe: str, status: str) -> None:
        self.inner.probe_finished(host, probe, status)

    def host_finished(self, outcome: HostOutcome) -> None:
        self.inner.host_finished(outcome)


def assess_run(
    run: Run, judging: Judging, where: str, probed_code: int = 0, limit: str | None = None
) -> Assessment:
    """A saved run judged (fleet show, diff, check --run, report): what judging needs read
    (the rules may read the probes the run carries), then the run assessed. `probed_code`: the
    exit bits to start from (report shows the hosts' own); `limit`: only the hosts this
    `--limit` selects of the run's (`fleet check --run latest -l gpu-0[1-4]`)."""
    from fleet.api.assessing import assess
    from fleet.api.runs import limited_to

    run = limited_to(run, limit)
    prepared = prepare(judging, run.probes, Covering.of(run, where))
    with collection_paused():  # a verdict per rule and host, no garbage: fleet.collector
        return assess(run, judging, prepared, where, probed_code)


def with_rules_probing(
    options: ProbeOptions, probing: Probing | None
) -> tuple[ProbeOptions, tuple[str, ...]]:
    """`options` with what the rules files' `probing:` asks for where the command line left it
    open (no -p: their probes; no --sample: their sample, when health runs), and a line saying
    each choice and the option that overrides it."""
    if probing is None:
        return options, ()
    notes = []
    if options.probes is None and probing.probes is not None:
        options = dataclasses.replace(options, probes=probing.probes)
        notes.append(f"{probing.source}: probes {', '.join(probing.probes)} (-p to choose)")
    sampler = next(iter(declared.option_probes("sample_s")), "")  # the probe that samples
    sampler_runs = options.probes is None or sampler in options.probes
    if options.value("sample_s") is None and probing.sample_s is not None and sampler_runs:
        values = {**options.values, "sample_s": probing.sample_s}
        options = dataclasses.replace(options, values=values)
        notes.append(
            f"{probing.source}: {sampler} reads its counters twice, {probing.sample_s:g} s apart "
            "(--sample to change)"
        )
    return options, tuple(notes)


@dataclass(frozen=True)
class RunSummary:
    """One saved run as `fleet runs` lists it; `error` when its file cannot be read."""

    path: Path
    started: str = ""
    inventory: str = ""
    hosts: int = 0
    statuses: tuple[tuple[str, int], ...] = ()  # most common first
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.path.stem,
            "path": str(self.path),
            "started": self.started or None,
            "inventory": self.inventory or None,
            "hosts": self.hosts,
            "statuses": dict(self.statuses),
            "error": self.error,
        }


@dataclass(frozen=True)
class SavedRuns:
    """The runs folder: where it is and its runs, oldest first (`fleet runs`)."""

    folder: Path
    paths: tuple[Path, ...]

    def summaries(self) -> list[RunSummary]:
        return [_summary(path) for path in self.paths]

    def document(self, summaries: Sequence[RunSummary] | None = None) -> dict[str, Any]:
        """The fleet.runs/1 document (`fleet runs --json`)."""
        rows = self.summaries() if summaries is None else summaries
        return {
            "schema": RUNS_SCHEMA,
            "folder": str(self.folder),
            "runs": [row.to_dict() for row in rows],
        }


def saved_runs(runs_dir: str | Path | None = None) -> SavedRuns:
    """The saved runs of `runs_dir` (default: the runs folder), oldest first."""
    from fleet.api.runs import default_runs_dir, list_runs

    folder = Path(runs_dir) if runs_dir else default_runs_dir()
    return SavedRuns(folder, tuple(list_runs(folder)))


def _summary(path: Path) -> RunSummary:
    from fleet.api.runs import load_run

    try:
        run = load_run(path)
    except StoreError as exc:
        return RunSummary(path, error=exc.message)
    statuses = Counter(o.status for o in run.hosts.values())
    return RunSummary(
        path, run.started, run.inventory or "", len(run.hosts), tuple(statuses.most_common())
    )
