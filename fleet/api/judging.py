"""What a run is judged by (`Judging`) and what must be read before any host is contacted to
judge it (`prepare`: rules files, a baseline file, the run to drift against), each of which can
be wrong and is said so first. Light on purpose: `fleet probe` and `fleet check` import it before
the hosts start, and the judging itself (fleet.api.assessing: the analysis, the findings) only
while they work (tests/unit/test_startup_imports.py).

The built-in pack alone cannot be wrong (tests read every pack), so `read_rules_later` reads it
on a thread once the hosts are running: the hosts need not wait for it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.models import DEFAULT_TOLERANCE, Run

if TYPE_CHECKING:
    from fleet.analysis.baselines.build import Baseline
    from fleet.api.comparable import Covering
    from fleet.checks import Probing, Rule


@dataclass(frozen=True)
class Judging:
    """What a run is judged by. `baseline_run` is a saved run to report drift against
    (`--baseline RUN`); `baseline_file` a file of bands (`--baseline-file FILE`). `rules`: judge
    with rules at all; `gate`: judge as `fleet check` does, which turns on the five parts named
    below (each read where it acts), where the other commands only say what they found."""

    tolerance: float = DEFAULT_TOLERANCE
    cohort_by: str | None = None
    probe_dirs: tuple[str, ...] = ()
    packs: tuple[str, ...] = ()
    rules_files: tuple[str, ...] = ()
    rules: bool = False
    gate: bool = False
    strict: bool = False
    baseline_run: str | None = None
    baseline_file: str | None = None
    runs_dir: Path | None = None
    scope: str | None = None  # latest/previous: among this inventory's runs
    limit: str | None = None  # drift: only these hosts
    fail_on: str | None = None  # --fail-on: a finding at least this severe sets exit bit 32
    # the cross-host diff: its divergence is detail and findings for one run; a drift between
    # two says what changed, and its findings come from the hosts and the rules
    divergence: bool = True
    probe_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def rules_set_exit(self) -> bool:
        """A failed error rule sets exit bit 32 (else it is only said, as findings)."""
        return self.gate

    @property
    def judges_every_rule(self) -> bool:
        """Every rule is judged, those whose probes did not run too (`skipped`, reported); else
        only the rules the run can answer: the others would only be skipped noise."""
        return self.gate

    @property
    def shows_verdicts(self) -> bool:
        """The rules' verdicts are shown (else only a baseline file's)."""
        return self.gate

    @property
    def measures_line_rates(self) -> bool:
        """Each cohort's allreduce bandwidth as a share of its line rate, shown with the rules."""
        return self.rules and self.gate

    @property
    def band_sets_drift(self) -> bool:
        """A measurement outside its baseline band sets exit bit 16, as drift does (`fleet probe
        --baseline-file`); where rules gate, the band's verdict is a check rule's instead."""
        return not self.gate


@dataclass(frozen=True)
class Prepared:
    """What `prepare` read before probing: the rules (and where from), the baseline file, the
    earlier run. A bad one has raised by now, naming itself."""

    rules: Sequence[Rule] = ()
    sources: tuple[str, ...] = ()
    baseline: Baseline | None = None
    old: Run | None = None
    probing: Probing | None = None  # how the rules files want the hosts probed (`probing:`)
    old_chosen: str = ""  # why `old` is the run --baseline latest means (fleet/api/comparable.py)


def prepare(
    judging: Judging, run_probes: Sequence[str] = (), covering: Covering | None = None
) -> Prepared:
    """Read the rules, the baseline file and the earlier run: each can be wrong, and is said so
    before any host is contacted. `run_probes`: the probes of a saved run being judged (a rule
    may read a probe of yours that it ran). `covering`: what the earlier run must cover (the
    judged run's hosts and probes: `latest` is then the newest that covers them); without it,
    the run --baseline names as it is."""
    rules, sources, probing = read_rules(judging, run_probes) if judging.rules else ((), (), None)
    baseline = None
    if judging.baseline_file:
        from fleet.api.baselines import load_baseline

        baseline = load_baseline(judging.baseline_file)
    prepared = Prepared(rules, sources, baseline, None, probing)
    if covering is not None:
        return with_baseline_run(prepared, judging, covering)
    if judging.baseline_run:
        from fleet.api.runs import load_run, resolve_run  # the store: only for a --baseline

        old = load_run(resolve_run(judging.baseline_run, judging.runs_dir, judging.scope))
        return dataclasses.replace(prepared, old=old)
    return prepared


def with_baseline_run(prepared: Prepared, judging: Judging, covering: Covering) -> Prepared:
    """`prepared` with the earlier run --baseline names: for latest/previous, the newest of the
    same inventory that covers `covering` (a --limit or -p run of fewer hosts or probes is
    passed over, and said)."""
    if not judging.baseline_run:
        return prepared
    from fleet.api.comparable import choose_baseline  # the store: only for a --baseline

    old, chosen = choose_baseline(judging.baseline_run, judging.runs_dir, judging.scope, covering)
    return dataclasses.replace(prepared, old=old, old_chosen=chosen)


def read_rules(
    judging: Judging, run_probes: Sequence[str] = (), among: Collection[str] | None = None
) -> tuple[Sequence[Rule], tuple[str, ...], Probing]:
    """The rules of `judging`'s packs and files (the `inference` pack when it names none), where
    they came from, and their `probing:`. `among`: of the default pack, only the rules that read
    none but these probes."""
    from fleet.api.checking import load_rule_set

    found = load_rule_set(judging.packs, judging.rules_files, judging.probe_dirs, run_probes, among)
    return found.rules, found.sources, found.probing


class RulesLater:
    """The default pack, read on a thread while the hosts work (`start`, called when the first
    host is running: sooner, the thread would hold the GIL while hosts are being started).
    `joined` waits for it; what the reading raised is raised there, as `prepare` would have.

    Only for the default pack alone (`applies`): nothing the user wrote is read, so nothing can be
    wrong that should have stopped the run before it started, and that pack asks for no probes
    or sample of its own (`probing:`; tests/cli/test_pack_probing.py holds both)."""

    def __init__(self, judging: Judging, probes: Collection[str]) -> None:
        self.judging = judging
        # findings only (fleet probe): a rule reading a probe the run has not is never judged
        # (fleet.api.assessing._checks), so it is not even parsed; fleet check reports them all
        self.among = None if judging.gate else probes
        self._thread: threading.Thread | None = None
        self._read: tuple[Sequence[Rule], tuple[str, ...], Probing | None] | None = None
        self._error: BaseException | None = None

    @staticmethod
    def applies(judging: Judging) -> bool:
        return judging.rules and not judging.packs and not judging.rules_files

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="fleet-rules", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        try:
            self._read = self._none_to_judge() or read_rules(self.judging, among=self.among)
        except BaseException as exc:  # noqa: BLE001 - raised again by `joined`, in its thread
            self._error = exc

    def _none_to_judge(self) -> tuple[Sequence[Rule], tuple[str, ...], None] | None:
        """No rules, when the pack's index says that none of them reads only the probes run
        (`fleet probe -p system`): the pack is not parsed, nor the rules engine loaded."""
        if self.among is None:
            return None
        # not through fleet.api.checking: the question needs no rules engine
        from fleet.checks import DEFAULT_PACK, rules_reading_only

        if rules_reading_only(DEFAULT_PACK, self.among) != frozenset():
            return None
        return (), (f"pack {DEFAULT_PACK}",), None

    def joined(self, prepared: Prepared) -> Prepared:
        """`prepared` with the rules read (read here and now if the hosts never ran)."""
        if self._thread is None:
            self._work()
        else:
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._read is not None
        rules, sources, probing = self._read
        return dataclasses.replace(prepared, rules=rules, sources=sources, probing=probing)
