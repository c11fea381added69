"""`fleet check --drain` / `--resume`: the thin part that talks to Slurm. The plan (which node,
which command) is fleet/findings/draining.py's; this reads the nodes' state now (sinfo), runs
the planned `scontrol update` argument lists (never a shell), and for --resume over --slurm
holds the nodes fleet drained in a reservation of the caller's while they are probed again:
Slurm launches nothing on a drained node, so they are returned to service inside a reservation
that only the caller may use, probed, and drained again unless their findings are gone."""

from __future__ import annotations

import getpass
import math
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from fleet.errors import UsageError
from fleet.findings.assessment import Assessment
from fleet.findings.draining import (
    HostSeen,
    Step,
    fleet_drained,
    plan_after_recheck,
    plan_drain,
    plan_resume,
    resume_argv,
)
from fleet.hostsets import compact_hosts
from fleet.inventory.slurm import SINFO_FORMAT, RunCommand, SlurmNode, parse_sinfo, run_command
from fleet.models import Host, Run
from fleet.registry import declared
from fleet.store import run_file_name

__all__ = [
    "Changes",
    "Recheck",
    "Step",
    "apply_changes",
    "drain_plan",
    "node_names",
    "plan_changes",
    "recheck_candidates",
    "recheck_held",
    "resume_plan",
    "run_id",
    "slurm_nodes",
]


def run_id(run: Run) -> str:
    """The run's id in a reason: its saved file's name without `.json` (`fleet show ID`)."""
    return run_file_name(run).removesuffix(".json")


def node_names(run: Run, hosts: Iterable[Host] = ()) -> dict[str, str]:
    """Each host of the run → its Slurm node: `slurm_node:` of the inventory, else its name."""
    named = {host.name: host.slurm_node for host in hosts if host.slurm_node}
    return {name: named.get(name, name) for name in run.hosts}


def seen_hosts(run: Run) -> dict[str, HostSeen]:
    return {
        name: HostSeen(outcome.status, outcome.probe_ok(declared.drain_witness()))
        for name, outcome in run.hosts.items()
    }


def slurm_nodes(names: Iterable[str], run: RunCommand | None = None) -> dict[str, SlurmNode]:
    """The named nodes as Slurm reports them now (a name Slurm does not know is left out)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    text = (run or run_command)(["sinfo", "-h", "-N", "-n", ",".join(wanted), "-o", SINFO_FORMAT])
    return {node.name: node for node in parse_sinfo(text) if node.name in wanted}


def drain_plan(
    assessment: Assessment, hosts: Iterable[Host] = (), run: RunCommand | None = None
) -> list[Step]:
    node_of = node_names(assessment.run, hosts)
    nodes = slurm_nodes(node_of.values(), run)
    seen = seen_hosts(assessment.run)
    return plan_drain(assessment.findings, seen, node_of, nodes, run_id(assessment.run))


def resume_plan(
    assessment: Assessment, hosts: Iterable[Host] = (), run: RunCommand | None = None
) -> list[Step]:
    node_of = node_names(assessment.run, hosts)
    nodes = slurm_nodes(node_of.values(), run)
    return plan_resume(assessment.findings, seen_hosts(assessment.run), node_of, nodes)


@dataclass(frozen=True)
class Done:
    step: Step
    error: str | None = None  # scontrol's own words when it failed


def apply_steps(steps: Sequence[Step], run: RunCommand | None = None) -> list[Done]:
    """Run each step's command; a failure is said with scontrol's words and the others still
    run (one node's trouble does not keep the others in or out of service)."""
    done = []
    for step in steps:
        if not step.changes:
            continue
        try:
            (run or run_command)(list(step.argv))
        except UsageError as exc:
            done.append(Done(step, " ".join(filter(None, [exc.message, exc.context]))))
            continue
        done.append(Done(step))
    return done


# ------------------------------------------------------------------ --resume over --slurm


@dataclass(frozen=True)
class Recheck:
    """Nodes fleet drained, idle, to probe again inside a reservation of the caller's."""

    nodes: tuple[SlurmNode, ...]
    reservation: str
    user: str
    minutes: int

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    def commands(self) -> list[tuple[str, ...]]:
        """What holds them (the reservation, then the resume), in order."""
        create = (
            "scontrol",
            "create",
            "reservation",
            f"ReservationName={self.reservation}",
            f"Nodes={','.join(self.names)}",
            "StartTime=now",
            f"Duration={self.minutes}",
            f"Users={self.user}",
            "Flags=MAINT",
        )
        return [create, *(resume_argv(name) for name in self.names)]

    def release(self) -> tuple[str, ...]:
        return ("scontrol", "delete", f"ReservationName={self.reservation}")


def recheck_candidates(run: Run, timeout_s: float) -> Recheck | None:
    """The nodes of a --slurm run (its hosts: --limit applies) that fleet drained and that hold
    no job (drained, not draining): Slurm did not launch on them, so the run cannot say their
    findings are gone."""
    record: Mapping[str, Mapping[str, object]] = (run.slurm or {}).get("nodes") or {}
    nodes = []
    for name, entry in record.items():
        if name not in run.hosts:  # left out by --limit: not this run's to recheck
            continue
        node = SlurmNode(name, str(entry.get("state") or ""), _text(entry.get("reason")), False)
        if fleet_drained(node) and node.state.startswith("drained"):
            nodes.append(node)
    if not nodes:
        return None
    minutes = max(5, math.ceil((timeout_s + 120) / 60))  # ends by itself if fleet is killed
    return Recheck(tuple(nodes), f"fleet-recheck-{run_id(run)}", getpass.getuser(), minutes)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


RESPONDING_S = 30.0  # slurmctld pings a resumed node at once: it answers within a second here


def hold(recheck: Recheck, run: RunCommand | None = None) -> None:
    """Reserve the nodes for the caller, then return them to service inside the reservation,
    and wait until Slurm has heard from them (a resumed node is `idle*`, not responding, until
    slurmctld's ping is answered: Slurm launches nothing there meanwhile). A node still silent
    after RESPONDING_S is probed anyway: it ends unavailable and is drained again."""
    for argv in recheck.commands():
        (run or run_command)(list(argv))
    deadline = time.monotonic() + RESPONDING_S
    while time.monotonic() < deadline:
        nodes = slurm_nodes(recheck.names, run)
        if all(node.usable for node in nodes.values()):
            return
        time.sleep(0.25)


def release(recheck: Recheck, run: RunCommand | None = None) -> str | None:
    """Delete the reservation; scontrol's words when it could not be (it expires by itself)."""
    try:
        (run or run_command)(list(recheck.release()))
    except UsageError as exc:
        return " ".join(filter(None, [exc.message, exc.context]))
    return None


def after_recheck(again: Assessment, recheck: Recheck, run: Run) -> list[Step]:
    """The held nodes after they were probed again (`again`; `run`: the run that found them
    drained, whose id a new reason names): each stays in service, or is drained again."""
    before = {node.name: node for node in recheck.nodes}
    return plan_after_recheck(again.findings, seen_hosts(again.run), before, run_id(run))


def as_they_were(recheck: Recheck) -> list[Step]:
    """Nothing proved the held nodes healthy: each drained again, its old reason kept."""
    before = {node.name: node for node in recheck.nodes}
    return plan_after_recheck((), {}, before, "")


# ------------------------------------------------------------------ what fleet check does

Say = Callable[[str], None]  # one line for the user: the caller prints it


@dataclass(frozen=True)
class Changes:
    """What --drain/--resume will change: the steps, and the nodes to recheck (--slurm)."""

    steps: tuple[Step, ...] = ()
    recheck: Recheck | None = None

    @property
    def any(self) -> bool:
        return self.recheck is not None or any(step.changes for step in self.steps)

    def lines(self) -> list[str]:
        """Each step and its exact command, as the user reads them before anything runs."""
        lines = []
        for step in self.steps:
            if step.changes:
                lines += [f"{step.verb} {step.node}: {step.why}", f"  {step.command}"]
            else:
                lines.append(f"{step.node}: {step.why}")
        held = self.recheck
        if held is not None:
            names = compact_hosts(held.names)
            lines.append(
                f"recheck {names} (drained by fleet): probed again in a reservation of yours"
            )
            lines += [f"  {shlex.join(argv)}" for argv in held.commands()]
            lines.append(f"  then: fleet probes {names}; drains again any whose findings remain")
            lines.append(f"  {shlex.join(held.release())}")
        return lines


def plan_changes(
    assessment: Assessment,
    hosts: Iterable[Host],
    *,
    drain: bool,
    resume: bool,
    recheck_timeout_s: float | None,
) -> Changes:
    """The steps for a judged run; `recheck_timeout_s` (None: a saved run, nothing rechecked)
    the per-host timeout of probing held nodes again, which bounds their reservation."""
    hosts = list(hosts)
    steps = list(drain_plan(assessment, hosts)) if drain else []
    recheck = None
    if resume:
        if assessment.run.slurm is not None and recheck_timeout_s is not None:
            recheck = recheck_candidates(assessment.run, recheck_timeout_s)
        held = set(recheck.names) if recheck else set()
        steps += [step for step in resume_plan(assessment, hosts) if step.node not in held]
    return Changes(tuple(steps), recheck)


def apply_changes(steps: Sequence[Step], say: Say, run: RunCommand | None = None) -> bool:
    """Run the steps, each outcome said; whether a command failed."""
    failed = False
    for done in apply_steps(steps, run):
        if done.error is None:
            say(f"{done.step.node}: {PAST.get(done.step.verb, done.step.verb)}")
        else:
            failed = True
            say(f"error: {done.step.node} not changed: {done.error}")
    return failed


PAST = {"drain": "drained", "update": "reason updated", "resume": "returned to service"}


def recheck_held(
    recheck: Recheck, run: Run, probe: Callable[[str, str], Assessment], say: Say
) -> tuple[int, bool]:
    """Hold the nodes, probe them again (`probe(NODESET, RESERVATION)`), drain again those still
    sick while the reservation holds them, release it: the second run's exit bits, and whether
    a command failed. Anything raised drains them all again (nothing proved them healthy)."""
    try:
        hold(recheck)
        again = probe(",".join(recheck.names), recheck.reservation)
        steps = after_recheck(again, recheck, run)
        for step in steps:  # what the second look found
            say(f"{step.node}: {'' if step.changes else 'returned to service: '}{step.why}")
        failed = apply_changes(steps, say)
    except BaseException:
        apply_steps(as_they_were(recheck))
        raise
    finally:
        left = release(recheck)
        if left:
            say(f"warning: reservation {recheck.reservation} not deleted ({left}); it ends itself")
    return again.exit_code, failed
