"""An assessment: everything fleet says about one run — the cross-host diff, the drift against an
earlier run, the verdicts of rules and of a baseline file, line rates, the findings, and the exit
bits. Made by fleet.api.assessing.assess; every surface (terminal, JSON, Markdown, JUnit, HTML)
renders the same one, so they cannot disagree."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fleet.exits import with_bits
from fleet.findings.model import Finding, NotJudgedLine
from fleet.models import Run

if TYPE_CHECKING:
    from fleet.analysis.across_hosts.diff import FleetDiff
    from fleet.analysis.across_runs.drift import Drift
    from fleet.analysis.baselines.judge import BaselineJudgement
    from fleet.checks import CheckReport


class LineRateRecord(Protocol):
    """A cohort's bus bandwidth against its hardware's line rate, as a unit measures it
    (fleet/units/allreduce/linerate.py): the assessment keeps it and writes it in the check
    document; the unit's terminal part shows it."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Assessment:
    """One run, judged. `where` is where the run is kept (a saved file, or what was probed);
    `exit_code` the command's bits, those of the probing included when it probed now."""

    run: Run
    where: str
    diff: FleetDiff
    findings: tuple[Finding, ...] = ()
    not_judged: tuple[NotJudgedLine, ...] = ()
    drift: Drift | None = None
    checks: CheckReport | None = None
    baseline: BaselineJudgement | None = None
    # a baseline file's verdicts alone (baseline-allreduce, …): what `fleet probe` shows of it
    baseline_verdicts: CheckReport | None = None
    # whether the rules gate the exit code (fleet check, report's packs) or only speak through
    # findings (fleet probe, fleet show)
    gated: bool = False
    line_rates: tuple[LineRateRecord, ...] = ()
    sources: tuple[str, ...] = ()
    exit_code: int = 0

    @property
    def shown_verdicts(self) -> CheckReport | None:
        """The verdicts a page or a table shows: every rule's where they gate, else a baseline
        file's alone."""
        return self.checks if self.gated else self.baseline_verdicts

    def check_document(self) -> dict[str, Any]:
        """The fleet.check/3 document (`fleet check --json`): the report plus which run and
        rules it judged, the baseline file's verdicts, the line rates and the findings."""
        assert self.checks is not None  # fleet check always judges rules
        document = self.checks.to_dict()
        result = {
            "schema": document.pop("schema"),
            "run": {
                "started": self.run.started,
                "finished": self.run.finished,
                "location": self.where,
            },
            "rules_from": list(self.sources),
            **document,
        }
        if self.baseline is not None:
            result["baseline"] = self.baseline.to_dict()
        result["line_rate"] = [rate.to_dict() for rate in self.line_rates]
        result["findings"] = [finding.to_dict() for finding in self.findings]
        return result

    def with_exit_bits(self, bits: int) -> Assessment:
        return dataclasses.replace(self, exit_code=with_bits(self.exit_code, bits))
