"""`fleet check --drain` / `--resume`: after the report, the Slurm nodes whose findings call for
it are drained (or returned to service), the exact commands printed first. `--dry-run` prints
them and changes nothing; without `--yes` fleet asks on a terminal and refuses without one.
The plan is fleet/findings/draining.py's, the commands fleet/api/draining.py's."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from fleet import api
from fleet.api.draining import apply_changes, plan_changes, recheck_held
from fleet.cli.options import together
from fleet.cli.probing import ProbeRequest, probe_and_assess
from fleet.errors import UsageError
from fleet.exits import EXIT_NOT_KEPT
from fleet.models import Host

DRAIN_OPTIONS = together(
    click.option(
        "--drain",
        is_flag=True,
        help="Set DRAIN on the Slurm node of every host whose findings call for reset-gpu, "
        "reboot, drain or inspect-hw at severity error (reason 'fleet: …'). Never a node "
        "drained for another reason, never a host only because it was not reached.",
    ),
    click.option(
        "--resume",
        is_flag=True,
        help="Return to service the Slurm nodes fleet drained whose findings are gone (with "
        "--slurm, each is probed again inside a reservation of yours first).",
    ),
    click.option("--yes", is_flag=True, help="Run the --drain/--resume commands without asking."),
    click.option(
        "--dry-run",
        is_flag=True,
        help="Print the --drain/--resume commands; change nothing.",
    ),
)


@dataclasses.dataclass(frozen=True)
class Operation:
    drain: bool
    resume: bool
    yes: bool
    dry_run: bool

    @classmethod
    def pop_from(cls, kwargs: dict[str, Any]) -> Operation:
        return cls(*(bool(kwargs.pop(k)) for k in ("drain", "resume", "yes", "dry_run")))

    @property
    def wanted(self) -> bool:
        return self.drain or self.resume

    def check(self, run_ref: str | None) -> None:
        """Refused before any host is contacted: what makes no sense alone or with --run."""
        if (self.yes or self.dry_run) and not self.wanted:
            raise UsageError("--yes and --dry-run go with --drain or --resume")
        if self.yes and self.dry_run:
            raise UsageError("--yes runs the commands, --dry-run does not: give one of them")
        if self.resume and run_ref is not None:
            raise UsageError(
                "--resume needs the hosts probed now: a saved run cannot say a fault is gone",
                hint="drop --run RUN",
            )


def operate(
    op: Operation,
    assessment: api.Assessment,
    hosts: Sequence[Host],
    request: ProbeRequest | None,
    judging: api.Judging,
) -> api.Assessment:
    """Plan, print, confirm, run; the assessment with the exit bits of what went wrong (64: a
    command failed; the recheck's own bits). `request`: how the hosts were probed (None: a
    saved run, --drain only)."""
    say = _sayer(request)
    if assessment.run.interrupted:
        say("interrupted: nothing changed in Slurm")
        return assessment
    timeout_s = request.options().host_timeout_s if request is not None else None
    changes = plan_changes(
        assessment, hosts, drain=op.drain, resume=op.resume, recheck_timeout_s=timeout_s
    )
    for line in changes.lines():
        say(line)
    if not changes.any:
        say("nothing to change in Slurm")
        return assessment
    if op.dry_run:
        say("dry run: nothing changed")
        return assessment
    _confirm(op)
    failed = apply_changes(changes.steps, say)
    if changes.recheck is not None and request is not None:
        probe = _prober(request, judging)
        code, failed_again = recheck_held(changes.recheck, assessment.run, probe, say)
        assessment = assessment.with_exit_bits(code)
        failed |= failed_again
    return assessment.with_exit_bits(EXIT_NOT_KEPT if failed else 0)


def _sayer(request: ProbeRequest | None) -> Callable[[str], None]:
    to_stderr = request is not None and request.json_path == "-"
    return lambda line: click.echo(line, err=to_stderr)


def _confirm(op: Operation) -> None:
    if op.yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError(
            "--drain/--resume change Slurm nodes: nothing was changed (no terminal to ask on)",
            hint="add --yes to run the commands above, or --dry-run to only print them",
        )
    if not click.confirm("Run the commands above?", default=False, err=True):
        raise UsageError("nothing was changed (not confirmed)")


def _prober(request: ProbeRequest, judging: api.Judging) -> Callable[[str, str], api.Assessment]:
    """How --resume probes held nodes again: as the command probed, over those nodes alone,
    inside their reservation, judged alike."""

    def probe(nodes: str, reservation: str) -> api.Assessment:
        site = f"{request.slurm_args or ''} --reservation={reservation}".strip()
        again = dataclasses.replace(
            request,
            slurm_target=f"nodes={nodes}",
            slurm_args=site,
            limit=None,
            json_path=None,
            html_path=None,
        )
        return probe_and_assess(again, judging).assessment

    return probe
