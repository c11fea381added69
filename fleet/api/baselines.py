"""Baselines: made from known-good runs, written and read as YAML, and runs judged against them
(`fleet baseline`, `fleet check --baseline`, `fleet probe --baseline-file`); the hardware's line
rate where no baseline is needed; drift judged against a baseline's bands.

    base = make_baseline(["run1.json", "run2.json"])          # or saved runs: "latest", a name
    write_baseline(base, "baseline.yaml")
    judged = judge_baseline(run, load_baseline("baseline.yaml"))
    report = with_baseline(check(run), judged)                # the verdicts as check rules
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.analysis.across_runs.bands import DEFAULT_FLOOR, DEFAULT_K
from fleet.analysis.across_runs.drift import Drift
from fleet.analysis.baselines.build import Baseline, place_hosts
from fleet.analysis.baselines.file import BaselineFileError, baseline_text, parse_baseline
from fleet.analysis.baselines.judge import BaselineJudgement, family_text, judge_run
from fleet.analysis.facts import declared_facts
from fleet.api.comparing import DEFAULT_TOLERANCE, drift
from fleet.api.runs import resolve_run
from fleet.errors import FleetError, StoreError
from fleet.models import NOT_REACHED, Run
from fleet.store import read_run_file
from fleet.units.allreduce.baselines import PROBE as ALLREDUCE
from fleet.units.allreduce.linerate import CohortLineRate, cohort_line_rates
from fleet.version import __version__

if TYPE_CHECKING:
    from fleet.checks import CheckReport, RuleResult

__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_K",
    "BandWidth",
    "Baseline",
    "BaselineFileError",
    "BaselineJudgement",
    "CohortLineRate",
    "baseline_document",
    "baseline_drift",
    "baseline_report",
    "baseline_results",
    "baseline_text",
    "judge_baseline",
    "line_rates",
    "load_baseline",
    "make_baseline",
    "with_baseline",
    "write_baseline",
]

FIX = (
    "rerun to rule out noise; if the host is sound and the change is meant (an upgrade), make "
    "the baseline again from good runs of it: fleet baseline RUN [RUN…] -o FILE"
)


@dataclass(frozen=True)
class BandWidth:
    """How wide make_baseline draws a band: `k` standard deviations (estimated from the MAD)
    and at least `floor` × the median."""

    k: float = DEFAULT_K
    floor: float = DEFAULT_FLOOR


def make_baseline(
    runs: Sequence[str | Path | Run],
    runs_dir: str | Path | None = None,
    inventory: str | None = None,
    *,
    k: float = DEFAULT_K,
    floor: float = DEFAULT_FLOOR,
    cohort_by: str | None = None,
    probe_dirs: Sequence[str | Path] = (),
) -> Baseline:
    """A baseline from known-good runs: files, saved runs' names, `latest`, `previous` (scoped to
    `inventory` as for load_run), or Run objects. Per cohort, every measurement's median and band
    (median ± max(floor × median, min(k × 1.4826 × MAD, spread + floor × median)), spread the
    farthest value's distance from the median)."""
    from fleet.analysis.baselines.build import build_baseline

    loaded: list[tuple[str, Run]] = []
    for ref in runs:
        if isinstance(ref, Run):
            loaded.append((f"run started {ref.started}", ref))
        else:
            path = resolve_run(ref, runs_dir, inventory)
            loaded.append((str(path), read_run_file(path)))
    created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return build_baseline(
        loaded,
        declared_facts(probe_dirs),
        fleet_version=__version__,
        created=created,
        k=k,
        floor=floor,
        cohort_by=cohort_by,
    )


def baseline_document(baseline: Baseline) -> dict[str, Any]:
    """The fleet.baseline/1 document as data (`fleet baseline --json`): what the YAML file
    holds, read back as YAML reads it, so the two cannot differ."""
    import yaml

    document: dict[str, Any] = yaml.safe_load(baseline_text(baseline))
    return document


def write_baseline(baseline: Baseline, path: str | Path) -> Path:
    """Write the baseline's YAML to `path` (a temp file renamed over it); StoreError when it
    cannot be written."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(baseline_text(baseline), encoding="utf-8")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise StoreError(
            f"cannot write the baseline to {target}: {exc.strerror}",
            hint="is the folder there and writable?",
        ) from exc
    return target


def load_baseline(path: str | Path) -> Baseline:
    """A baseline file, validated: every mistake a BaselineFileError naming FILE:LINE. A saved
    run or a run document given instead is named as one, with the flag that takes it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        if _is_saved_run(str(path)):
            raise BaselineFileError(
                f"{path} is a saved run, not a baseline file", hint=RUN_NOT_BASELINE
            ) from exc
        raise BaselineFileError(
            f"baseline file {path} does not exist",
            hint="make one from known-good runs: fleet baseline RUN [RUN…] -o FILE",
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineFileError(f"cannot read baseline file {path}: {exc}") from exc
    other = _other_document(text)
    if other is not None:
        run = other.startswith("fleet.run")
        raise BaselineFileError(
            f"{path} is {'a run' if run else 'a document'} ({other}), not a baseline file",
            hint=RUN_NOT_BASELINE if run else REMAKE_HINT,
        )
    return parse_baseline(text, str(path))


RUN_NOT_BASELINE = (
    "a run is read by fleet show RUN, fleet diff RUN latest and fleet probe --baseline RUN "
    "(drift); a baseline file is made from runs: fleet baseline RUN [RUN…] -o baseline.yaml"
)
REMAKE_HINT = "make a baseline file from known-good runs: fleet baseline RUN [RUN…] -o FILE"


def _is_saved_run(ref: str) -> bool:
    """Whether `ref` names a saved run (latest, previous, a run's name) rather than a file."""
    if ref.partition(":")[0] in ("latest", "previous"):
        return True
    try:
        resolve_run(ref)
    except (FleetError, OSError):
        return False
    return True


def _other_document(text: str) -> str | None:
    """The id of a fleet JSON document that is no baseline (a run, a check), or None."""
    if not text.lstrip().startswith("{"):
        return None  # a baseline is YAML; whatever else it is, parse_baseline says
    try:
        document = json.loads(text)
    except ValueError:
        return None
    schema = document.get("schema") if isinstance(document, dict) else None
    if isinstance(schema, str) and not schema.startswith("fleet.baseline/"):
        return schema
    if schema is None and isinstance(document, dict) and "hosts" in document:
        return "fleet.run"  # a run of an older fleet: no id
    return None


def judge_baseline(
    run: Run, baseline: Baseline, probe_dirs: Sequence[str | Path] = ()
) -> BaselineJudgement:
    """Each host of `run` against the bands of its cohort in `baseline`."""
    return judge_run(run, baseline, declared_facts(probe_dirs))


def baseline_results(judged: BaselineJudgement) -> tuple[RuleResult, ...]:
    """The judgement as check rules (kind `baseline`), one per family the baseline has
    (`baseline-allreduce`, `baseline-allreduce-matrix`, `baseline-fabric`), so the terminal,
    the JSON document, JUnit and the HTML report give the same verdicts as for any rule."""
    from fleet.checks import Rule, RuleResult, RuleVerdict

    baseline = judged.baseline
    where = baseline.path or "the baseline"
    results = []
    for family in baseline.families:
        rule = Rule(
            id=f"baseline-{family}",
            description=f"{family_text(family)}: inside the band of the host's cohort in {where}",
            severity="error",
            fix=FIX,
            source=baseline.path or "(made here)",
        )
        verdicts = []
        for host, verdict in judged.verdicts(family):
            failed = verdict.status == "fail"
            label = host.cohort.label if host.cohort else host.own_cohort
            reason = verdict.reason
            if failed or verdict.status == "pass":
                reason = "; ".join(
                    p for p in (f"versions: {host.versions_line()}", host.note, reason) if p
                )
            verdicts.append(
                RuleVerdict(
                    host.host,
                    verdict.status,
                    observed=host.failure_lines(family) if failed else None,
                    cohort=label,
                    fix=FIX if failed else None,
                    reason=reason if verdict.status != "pass" else "",
                )
            )
        results.append(RuleResult(rule, tuple(verdicts)))
    return tuple(results)


def baseline_report(run: Run, judged: BaselineJudgement) -> CheckReport:
    """The baseline's verdicts alone as a check report (`fleet probe --baseline-file`)."""
    from fleet.checks import evaluate

    return with_baseline(evaluate([], run), judged)


def with_baseline(report: CheckReport, judged: BaselineJudgement) -> CheckReport:
    """The check report with the baseline's verdicts after its rules."""
    return dataclasses.replace(report, results=(*report.results, *baseline_results(judged)))


def line_rates(run: Run, probe_dirs: Sequence[str | Path] = ()) -> list[CohortLineRate]:
    """Per cohort, each host's allreduce bus bandwidth at its largest size as a share of its
    GPUs' line rate (NVLink generation × links, PCIe generation × lanes)."""
    if not any(o.probe_ok(ALLREDUCE) for o in run.hosts.values()):
        return []  # nothing to place in cohorts: a run without allreduce has no line rates
    placed = place_hosts(run, declared_facts(probe_dirs), run.cohort_by)
    by_cohort: dict[str, list[str]] = {}
    for host, where in placed.items():
        by_cohort.setdefault(where.label or where.cohort, []).append(host)
    reached = {n: o for n, o in run.hosts.items() if o.status not in NOT_REACHED}
    return cohort_line_rates(
        (name, [reached[h] for h in hosts if h in reached]) for name, hosts in by_cohort.items()
    )


def baseline_drift(
    old: Run,
    new: Run,
    baseline: Baseline,
    tolerance: float = DEFAULT_TOLERANCE,
    probe_dirs: Sequence[str | Path] = (),
) -> Drift:
    """Drift between two runs with each measurement judged against the baseline's band instead
    of the fixed tolerance: it changed when it moved by more than its band's half-width (the
    noise the known-good runs showed); a measurement the baseline has no band for keeps
    `tolerance`."""
    from fleet.analysis.baselines.drift import judge_drift

    every = drift(old, new, 0.0, probe_dirs)  # every measurement that moved at all
    judged = drift(old, new, tolerance, probe_dirs)
    placed = place_hosts(new, declared_facts(probe_dirs), baseline.cohort_by or new.cohort_by)
    return judge_drift(every, judged, baseline, placed)
