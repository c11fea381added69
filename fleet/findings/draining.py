"""Which Slurm nodes to drain or return to service after a run, and the exact commands: pure
planning over the run's findings, its hosts' outcomes and the nodes' current Slurm state (`fleet
check --drain`, `--resume`). Nothing here runs a command: fleet/api/draining.py does, as the
argument lists planned here (no shell).

As LBNL NHC does: a node is drained with a reason that names fleet (`fleet: …`), and returned to
service only when fleet set its reason; a node drained for any other reason is never touched. A
host that was not reached is never drained on that ground alone (unreachable is not sick), nor
resumed (nothing says its findings are gone)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.findings.model import ACTIONS, Finding
from fleet.inventory.slurm import UNUSABLE_FLAGS, SlurmNode
from fleet.registry import declared

# The actions that take a node out of service: the GPU or the host needs hands, a reset or a
# replacement. contact-vendor is where health-row-remap escalates a pending remap (reset-gpu)
# once no spare rows are left: a worse GPU must not stay in service where a better one would not.
DRAIN_ACTIONS = ("drain", "reset-gpu", "reboot", "inspect-hw", "contact-vendor")
PREFIX = "fleet:"  # every reason fleet sets starts so; only such a node is fleet's to resume
# Slurm keeps a reason of any length, but sinfo -R, squeue and dashboards show the first few
# dozen characters; NHC's reasons are one short line. fleet's stays within this many.
MAX_REASON = 120
RUN_MARK = ", run "  # what follows is the run's id: the same cause in a later run is no change
# Only these reach the reason: scontrol splits its own arguments on quotes, and the reason is
# shown in terminals (no control characters).
UNSAFE = re.compile(r"[^\w .,:;()/+#@=\[\]→…-]", re.UNICODE)
GPU = re.compile(r"\bGPU(\d+)\b")
# A host that answered: its findings are what is known of it (partial: some probes failed).
REACHED = ("ok", "partial")
DRAINED_STATES = frozenset({"drain", "drained", "draining"})


@dataclass(frozen=True)
class Step:
    """What happens to one node: `verb` is drain (newly), update (fleet's reason changes),
    resume, or keep (nothing: `why` says so). `argv` is the scontrol command (empty for keep)."""

    node: str
    host: str
    verb: str
    why: str
    reason: str = ""
    argv: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """The command as a person would type it (quoted for a POSIX shell)."""
        return shlex.join(self.argv)

    @property
    def changes(self) -> bool:
        return bool(self.argv)


@dataclass(frozen=True)
class HostSeen:
    """What the run knows of a host: its outcome and whether the probe that proves its GPUs
    healthy (the health probe: its unit's DRAIN_WITNESS) ran there."""

    status: str
    health_ran: bool = False


def drain_findings(findings: Sequence[Finding], host: str) -> list[Finding]:
    """The host's findings that take its node out of service: severity error, an action of
    DRAIN_ACTIONS; the most disruptive first (ACTIONS is least disruptive first)."""
    found = [
        f
        for f in findings
        if host in f.hosts and f.severity == "error" and f.action in DRAIN_ACTIONS
    ]
    return sorted(found, key=lambda f: -ACTIONS.index(f.action))


def drain_reason(host: str, found: Sequence[Finding], run_id: str) -> str:
    """`fleet: gpu-03 GPU1 health-ecc-uncorrected → reset-gpu, run 20261203T030512Z`, within
    MAX_REASON characters (the finding's words are cut first, never the run)."""
    first = found[0]
    gpus = dict.fromkeys(f"GPU{n}" for n in GPU.findall(first.where))
    where = f" {','.join(gpus)}" if gpus else ""
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    tail = f" → {first.action}{more}{RUN_MARK}{run_id}"
    head = f"{PREFIX} {host}{where} {first.kind}"
    room = MAX_REASON - len(tail)
    if len(head) > room:
        head = head[: room - 1].rstrip() + "…"
    return UNSAFE.sub("_", head + tail)


def fleet_drained(node: SlurmNode) -> bool:
    """Whether the node is drained (or draining) with a reason fleet set."""
    return _drained(node) and (node.reason or "").startswith(PREFIX)


def _drained(node: SlurmNode) -> bool:
    base = node.state.rstrip("".join(UNUSABLE_FLAGS) + "#$-").split("+")
    return bool(DRAINED_STATES & set(base))


def _cause(reason: str) -> str:
    """A reason without its run: the same cause said by a later run reads equal."""
    return reason.split(RUN_MARK)[0]


def drain_argv(node: str, reason: str) -> tuple[str, ...]:
    return ("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")


def resume_argv(node: str) -> tuple[str, ...]:
    return ("scontrol", "update", f"NodeName={node}", "State=RESUME")


def plan_drain(
    findings: Sequence[Finding],
    seen: Mapping[str, HostSeen],
    node_of: Mapping[str, str],
    nodes: Mapping[str, SlurmNode],
    run_id: str,
) -> list[Step]:
    """A step for every host whose findings call for draining its node (`node_of`: host →
    Slurm node name, `nodes`: the nodes Slurm knows, as it reports them now)."""
    steps = []
    for host, status in seen.items():
        found = drain_findings(findings, host)
        if not found or status.status not in REACHED:
            continue  # not reached: unreachable is not sick
        steps.append(_drain_step(host, node_of.get(host, host), nodes, found, run_id))
    return steps


def _drain_step(
    host: str, name: str, nodes: Mapping[str, SlurmNode], found: Sequence[Finding], run_id: str
) -> Step:
    node = nodes.get(name)
    reason = drain_reason(host, found, run_id)
    if node is None:
        return Step(name, host, "keep", f"{name} is not a Slurm node here: not drained", reason)
    if fleet_drained(node):
        if _cause(node.reason or "") == _cause(reason):
            return Step(name, host, "keep", f"already drained by fleet: {node.reason}", reason)
        why = f"drained by fleet for another cause ({node.reason}): reason updated"
        return Step(name, host, "update", why, reason, drain_argv(name, reason))
    if _drained(node) or not node.usable:
        why = f"{node.state} for another reason ({node.reason or 'none given'}): left alone"
        return Step(name, host, "keep", why, reason)
    return Step(name, host, "drain", found[0].what, reason, drain_argv(name, reason))


def plan_resume(
    findings: Sequence[Finding],
    seen: Mapping[str, HostSeen],
    node_of: Mapping[str, str],
    nodes: Mapping[str, SlurmNode],
) -> list[Step]:
    """A step for every node fleet drained: resume it where the run reached its host, the health
    probe ran there and no finding calls for draining it any more; else say why not."""
    host_of = {node_of.get(host, host): host for host in seen}
    steps = []
    for name, node in nodes.items():
        host = host_of.get(name)
        if host is None or not fleet_drained(node):
            continue
        steps.append(_resume_step(name, host, node, seen[host], drain_findings(findings, host)))
    return steps


def _resume_step(
    name: str, host: str, node: SlurmNode, seen: HostSeen, found: Sequence[Finding]
) -> Step:
    if seen.status not in REACHED:
        return Step(name, host, "keep", f"not reached ({seen.status}): stays drained")
    if not seen.health_ran:
        why = (
            f"the {declared.drain_witness()} probe did not run there: stays drained ({node.reason})"
        )
        return Step(name, host, "keep", why)
    if found:
        return Step(name, host, "keep", f"still {found[0].kind} → {found[0].action}: stays drained")
    why = f"drained by fleet ({node.reason}); no finding calls for it now"
    return Step(name, host, "resume", why, argv=resume_argv(name))


def plan_after_recheck(
    findings: Sequence[Finding],
    seen: Mapping[str, HostSeen],
    before: Mapping[str, SlurmNode],
    run_id: str,
) -> list[Step]:
    """Nodes fleet drained, returned to service inside a reservation and probed again (`before`:
    as they were, fleet's reason theirs): each stays in service where its findings are gone,
    else is drained again (its old reason kept for the same cause, or when it was not probed)."""
    steps = []
    for name, node in before.items():
        old = node.reason or f"{PREFIX} {name}"
        host = seen.get(name)
        found = drain_findings(findings, name)
        if host is None or host.status not in REACHED or not host.health_ran:
            status = host.status if host else "not probed"
            why = f"not probed again ({status}): drained again"
            steps.append(Step(name, name, "drain", why, old, drain_argv(name, old)))
        elif found:
            reason = drain_reason(name, found, run_id)
            reason = old if _cause(old) == _cause(reason) else reason
            why = f"still {found[0].kind} → {found[0].action}: drained again"
            steps.append(Step(name, name, "drain", why, reason, drain_argv(name, reason)))
        else:
            why = f"probed again: no finding calls for draining it (was: {old})"
            steps.append(Step(name, name, "resumed", why))
    return steps
