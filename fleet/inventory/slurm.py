"""Hosts from a Slurm cluster: `--slurm partition=NAME | nodes=NODESET | job=ID`.

The nodes come from Slurm's own tools (sinfo, squeue, scontrol show hostnames), each with its state
and reason as `sinfo -N` reports them. A node Slurm says is unusable (down, drained, draining, failed,
not responding, powered off) is still listed, so that the run shows it with Slurm's reason, but the
Slurm transport never launches on it. Commands run with argument lists, never through a shell.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fleet.errors import InventoryError, UsageError
from fleet.hostsets import compact_hosts
from fleet.inventory.fleet_yaml import Inventory
from fleet.inventory.nodeset import expand_hostlist
from fleet.models import Host

TARGET_KINDS = ("partition", "nodes", "job")
COMMAND_TIMEOUT_S = 30.0
SLURM_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
JOB_ID = re.compile(r"^\d+(_\d+)?$")  # 1234, or an array task 1234_7

# sinfo's long states (%T) that mean "do not launch here"; a suffix flag can also say so:
# * not responding, ~ powered off, % powering off, ! about to power off, ^ and @ rebooting.
UNUSABLE_STATES = frozenset(
    {"down", "drained", "draining", "drain", "fail", "failing", "future", "inval", "unknown"}
    | {"powered_down", "powering_down", "power_down", "reboot_issued", "reboot_requested"}
)
UNUSABLE_FLAGS = frozenset("*~%!^@")
# Inside a job (job=ID) a draining node still runs that job: our step may join it there.
USABLE_IN_JOB = frozenset({"draining", "drain"})

OVERLAP_SINCE = (20, 11)  # srun --overlap: a step that shares the job's resources

# One line per node: name, long state, address (NodeAddr: where its ranks are reached, NodeName
# unless slurm.conf says otherwise), reason (last: it may contain anything but a newline).
SINFO_FORMAT = "%N|%T|%o|%E"

RunCommand = Callable[[Sequence[str]], str]  # argv → stdout: the Slurm tools, or a test's stand-in


@dataclass(frozen=True)
class SlurmTarget:
    kind: str  # partition | nodes | job
    value: str

    def __str__(self) -> str:
        return f"{self.kind}={self.value}"


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # as sinfo prints it, e.g. "idle", "drained", "down*"
    reason: str | None = None
    usable: bool = True
    address: str | None = None  # NodeAddr; None: the name

    def record(self) -> dict[str, str | bool | None]:
        return {"state": self.state, "reason": self.reason, "usable": self.usable}


@dataclass(frozen=True)
class SlurmCluster:
    """What --slurm found: the target, its nodes in Slurm's order, and the job for job=ID."""

    target: SlurmTarget
    nodes: Sequence[SlurmNode]
    job_id: str | None = None
    by_name: Mapping[str, SlurmNode] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {n.name: n for n in self.nodes})

    def inventory(self, python: str = "python3") -> Inventory:
        """An Inventory of every node (usable or not): `--limit` applies as to any other."""
        hosts = {n.name: slurm_host(n.name, python, n.address) for n in self.nodes}
        usable = tuple(n.name for n in self.nodes if n.usable)
        unusable = tuple(n.name for n in self.nodes if not n.usable)
        groups = {"slurm": tuple(hosts), "usable": usable, "unavailable": unusable}
        return Inventory(path=f"slurm:{self.target}", hosts=hosts, groups=groups)


def slurm_host(name: str, python: str = "python3", address: str | None = None) -> Host:
    """A node: srun reaches it by `name`; `address` (NodeAddr) is where its processes listen."""
    return Host(
        name=name, address=address or name, transport="slurm", python=python, groups=("slurm",)
    )


# ------------------------------------------------------------------------------- target parsing


def parse_target(text: str) -> SlurmTarget:
    """`partition=gpu`, `nodes=gpu-[01-04]` or `job=1234`; anything else names the valid forms."""
    kind, equals, value = text.strip().partition("=")
    kind, value = kind.strip(), value.strip()
    if not equals or kind not in TARGET_KINDS or not value:
        raise UsageError(
            f"--slurm {text!r} is not a Slurm target",
            hint="write partition=NAME, nodes=NODESET (e.g. gpu-[01-04]) or job=ID",
        )
    if kind == "job" and not JOB_ID.match(value):
        raise UsageError(f"--slurm job={value!r}: a job id is a number", hint="see squeue --me")
    if kind == "partition" and not SLURM_NAME.match(value):
        raise UsageError(
            f"--slurm partition={value!r} is not a partition name", hint="see sinfo -s"
        )
    if kind == "nodes":
        _check_nodeset(value)
    return SlurmTarget(kind, value)


def _check_nodeset(value: str) -> list[str]:
    """Every name of a nodeset, each checked: they go to Slurm as one argument, never a shell."""
    try:
        names = [n for part in _top_level_items(value) for n in expand_hostlist(part)]
    except InventoryError as exc:
        raise UsageError(f"--slurm nodes={value!r}: {exc.message}", hint=exc.hint) from exc
    bad = [n for n in names if not SLURM_NAME.match(n)]
    if bad:
        raise UsageError(
            f"--slurm nodes={value!r}: {bad[0]!r} is not a node name",
            hint="letters, digits, '.', '-', '_' and ranges like gpu-[01-04]",
        )
    return names


def _top_level_items(nodeset: str) -> list[str]:
    """Split `a-[1-2],b` at commas outside brackets."""
    items, depth, current = [], 0, ""
    for char in nodeset:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return [item.strip() for item in [*items, current] if item.strip()]


# ------------------------------------------------------------------------------- discovery


def discover(target: SlurmTarget, run: RunCommand | None = None) -> SlurmCluster:
    """The target's nodes with their states; a target with no nodes is a usage error."""
    run = run or run_command
    if target.kind == "job":
        return _job_nodes(target, run)
    where = ["-p", target.value] if target.kind == "partition" else ["-n", target.value]
    nodes = parse_sinfo(run(["sinfo", "-h", "-N", *where, "-o", SINFO_FORMAT]))
    if target.kind == "nodes":
        _check_known(target, nodes)
    if not nodes:
        raise UsageError(
            f"Slurm partition {target.value!r} has no nodes (or does not exist)",
            hint="list the partitions with: sinfo -s",
        )
    return SlurmCluster(target, nodes)


def _check_known(target: SlurmTarget, nodes: Sequence[SlurmNode]) -> None:
    unknown = sorted(set(_check_nodeset(target.value)) - {n.name for n in nodes})
    if unknown:
        raise UsageError(
            f"Slurm does not know node(s) {compact_hosts(unknown)} (or they are in no partition)",
            hint="list the nodes with: sinfo -N",
        )


def _job_nodes(target: SlurmTarget, run: RunCommand) -> SlurmCluster:
    require_overlap(run)
    try:
        line = run(["squeue", "-h", "-j", target.value, "-o", "%T|%N"]).strip().splitlines()
    except UsageError as exc:
        if "invalid job id" not in exc.context.lower():
            raise
        line = []  # squeue says "Invalid job id" for a job that ended a while ago
    state, _, nodelist = (line[0] if line else "").partition("|")
    if state != "RUNNING" or not nodelist.strip():
        raise UsageError(
            f"Slurm job {target.value} is {state.lower() or 'not in the queue'}: it has no nodes to probe",
            hint="probe a running job of yours (squeue --me -t running)",
        )
    names = run(["scontrol", "show", "hostnames", nodelist.strip()]).split()
    states = {
        n.name: n
        for n in parse_sinfo(run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", SINFO_FORMAT]))
    }
    nodes = [_in_job(states.get(name) or SlurmNode(name, "allocated")) for name in names]
    return SlurmCluster(target, nodes, job_id=target.value)


def _in_job(node: SlurmNode) -> SlurmNode:
    """A node holding the job stays usable while it only drains (the job still runs there)."""
    if node.usable or node.state.rstrip("".join(UNUSABLE_FLAGS)) not in USABLE_IN_JOB:
        return node
    return SlurmNode(node.name, node.state, node.reason, usable=True, address=node.address)


def require_overlap(run: RunCommand) -> None:
    """Joining a running job needs `srun --overlap` (Slurm 20.11+): say so before trying."""
    words = run(["srun", "--version"]).split()
    version = words[-1] if words else ""
    numbers = re.match(r"^(\d+)\.(\d+)", version)
    if numbers and (int(numbers.group(1)), int(numbers.group(2))) < OVERLAP_SINCE:
        raise UsageError(
            f"--slurm job=ID needs srun --overlap (Slurm 20.11+); this is Slurm {version}",
            hint="probe the job's nodes with --slurm nodes=NODESET outside the job instead",
        )


def parse_sinfo(text: str) -> list[SlurmNode]:
    """`sinfo -h -N -o '%N|%T|%o|%E'` → nodes, each once (a node in two partitions prints twice)."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        name, state, address, reason = [*line.strip().split("|", 3), "", "", ""][:4]
        if name and name not in nodes:
            nodes[name] = node_from_state(name, state.strip(), reason.strip(), address.strip())
    return list(nodes.values())


def node_from_state(name: str, state: str, reason: str, address: str = "") -> SlurmNode:
    base = state.lower().rstrip("".join(UNUSABLE_FLAGS) + "#$-")
    flags = set(state) & UNUSABLE_FLAGS
    usable = base not in UNUSABLE_STATES and not flags
    why = None if reason in ("", "none") else reason
    return SlurmNode(name, state.lower(), why, usable, address or None)


def run_command(argv: Sequence[str]) -> str:
    """Run a Slurm client command; its failure is a usage error quoting what it said."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError as exc:
        raise UsageError(
            f"{argv[0]} is not installed here", hint="run fleet where the Slurm client tools are"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise UsageError(
            f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s",
            hint="is slurmctld up? try: scontrol ping",
        ) from exc
    if done.returncode != 0:
        raise UsageError(
            f"{' '.join(argv[:2])} failed (exit status {done.returncode})",
            context=done.stderr.strip()[-500:],
            hint="is slurmctld up? try: scontrol ping",
        )
    return done.stdout
