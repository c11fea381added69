"""`fleet check --drain` / `--resume`: after the report, the Slurm nodes whose findings call for
it are drained (or returned to service), the exact commands printed first. `--dry-run` prints
them and changes nothing; without `--yes` fleet asks on a terminal and refuses without one.
The plan is fleet/findings/draining.py's, the commands fleet/api/draining.py's."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from fleet import api
from fleet.api.draining import (
    Recheck,
    Step,
    after_recheck,
    apply_steps,
    as_they_were,
    compact_hosts,
    drain_plan,
    hold,
    recheck_candidates,
    release,
    resume_plan,
)
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
    steps = [*(drain_plan(assessment, hosts) if op.drain else ())]
    recheck = None
    if op.resume and request is not None:
        if assessment.run.slurm is not None:
            recheck = recheck_candidates(assessment.run, request.options().host_timeout_s)
        held = set(recheck.names) if recheck else set()
        steps += [s for s in resume_plan(assessment, hosts) if s.node not in held]
    _say_plan(say, steps, recheck)
    if not any(s.changes for s in steps) and recheck is None:
        say("nothing to change in Slurm")
        return assessment
    if op.dry_run:
        say("dry run: nothing changed")
        return assessment
    _confirm(op)
    failed = _say_done(say, apply_steps(steps))
    if recheck is not None and request is not None:
        probe = _prober(judging)
        rechecked = _recheck(say, recheck, assessment, recheck_request(request, recheck), probe)
        assessment = assessment.with_exit_bits(rechecked)
    return assessment.with_exit_bits(EXIT_NOT_KEPT if failed else 0)


def _sayer(request: ProbeRequest | None) -> Callable[[str], None]:
    to_stderr = request is not None and request.json_path == "-"
    return lambda line: click.echo(line, err=to_stderr)


def _say_plan(say: Callable[[str], None], steps: Sequence[Step], recheck: Recheck | None) -> None:
    for step in steps:
        if step.changes:
            say(f"{step.verb} {step.node}: {step.why}")
            say(f"  {step.command}")
        else:
            say(f"{step.node}: {step.why}")
    if recheck is not None:
        names = compact_hosts(recheck.names)
        say(f"recheck {names} (drained by fleet): probed again inside a reservation of yours")
        for argv in recheck.commands():
            say(f"  {shlex.join(argv)}")
        say(f"  then: fleet probes {names}; drains again any whose findings remain")
        say(f"  {shlex.join(recheck.release())}")


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


def _say_done(say: Callable[[str], None], done: Sequence[Any]) -> bool:
    """Each command's outcome; whether one failed."""
    failed = False
    for item in done:
        if item.error is None:
            say(f"{item.step.node}: {_past(item.step.verb)}")
        else:
            failed = True
            say(f"error: {item.step.node} not changed: {item.error}")
    return failed


def _past(verb: str) -> str:
    return {"drain": "drained", "update": "reason updated", "resume": "returned to service"}.get(
        verb, verb
    )


def _prober(judging: api.Judging) -> Callable[[ProbeRequest], api.Assessment]:
    """What --resume probes held nodes with: the command's own judging."""
    return lambda request: probe_and_assess(request, judging).assessment


def _recheck(
    say: Callable[[str], None],
    recheck: Recheck,
    assessment: api.Assessment,
    request: ProbeRequest,
    probe: Callable[[ProbeRequest], api.Assessment],
) -> int:
    """Hold, probe again (`request`: over the held nodes), drain again what is still sick,
    release: the recheck's exit bits."""
    try:
        hold(recheck)
        again = probe(request)
        steps = after_recheck(again, recheck, assessment.run)
        for step in steps:  # what the second look found
            say(f"{step.node}: {'returned to service: ' if not step.changes else ''}{step.why}")
        failed = _say_done(say, apply_steps(steps))  # drained again inside the reservation
    except BaseException:
        apply_steps(as_they_were(recheck))  # nothing proved them healthy: as they were
        raise
    finally:
        left = release(recheck)
        if left:
            say(
                f"warning: reservation {recheck.reservation} not deleted ({left}); it ends by itself"
            )
    return again.exit_code | (EXIT_NOT_KEPT if failed else 0)


def recheck_request(request: ProbeRequest, recheck: Recheck) -> ProbeRequest:
    """The same probing, over the held nodes alone, inside their reservation."""
    site = f"{request.slurm_args or ''} --reservation={recheck.reservation}".strip()
    return dataclasses.replace(
        request,
        slurm_target=f"nodes={','.join(recheck.names)}",
        slurm_args=site,
        limit=None,
        json_path=None,
        html_path=None,
    )
