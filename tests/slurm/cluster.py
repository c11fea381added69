"""A real Slurm cluster on one machine for the tests: munged, slurmctld and one slurmd per node.

Debian's slurmd accepts `-N NODENAME`, so several slurmd share 127.0.0.1, each on its own port of
one node line (`NodeName=gpu-[01-05] ... Port=[P-P+4]`). Every file lives in one folder: the munge
key and socket, slurm.conf, state, spool and logs. A TaskProlog keyed on SLURMD_NODENAME gives each
node its own fake GPU stack (PATH with a fake nvidia-smi, PYTHONPATH with a torch stub), and a
flag file `hang-NODE` in the folder makes that node's Python hang at start-up (a sitecustomize that
ignores the bundle's alarm). The prolog also appends the node's name to `launched.log`, so a test can
prove a node was never launched on.

Clients (sinfo, srun, ...) find the cluster through SLURM_CONF: `cluster.env()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sinfo", "squeue", "scontrol", "sbatch", "scancel")
START_TIMEOUT_S = 30.0
TASK_MARKER = "FLEET_TEST_CLUSTER"  # in every task's environment: finds what a test left running

# The sitecustomize of a node whose interpreter hangs: it outlives the bundle's start-up alarm.
HANG_SITECUSTOMIZE = (
    "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(3600)\n"
)


def missing_binaries() -> list[str]:
    """What this machine lacks to run a test cluster (empty when it can)."""
    sbin = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [name for name in DAEMONS + CLIENTS if shutil.which(name, path=sbin) is None]


def _which(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    assert found, f"{name} is not installed"
    return found


def free_port_block(count: int, first: int = 17001, last: int = 40000) -> int:
    """The first port of `count` consecutive free loopback ports (slurmd's port range)."""
    for base in range(first + (os.getpid() % 97) * 11, last, count + 1):
        if all(_port_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class NodeStack:
    """A node's fake GPU stack: an nvidia-smi capture folder and a torch stub folder."""

    gpu_capture: Path
    torch_stub: Path


@dataclass
class SlurmCluster:
    folder: Path
    stacks: Mapping[str, NodeStack]  # node name → its stack, in node order
    partition: str = "gpu"
    slurmd_timeout_s: int = 30  # a node that answers no ping for this long is set DOWN
    # munged's threads (its default: 2). Every daemon of this one-machine cluster signs and checks
    # its messages through this one munged, where a real cluster has one per node: hundreds of
    # slurmd outrun two threads, and connections to the socket are refused.
    munge_threads: int | None = None
    # munged daemons, one key: node i signs through daemon i % K (its own slurm.conf names that
    # daemon's socket). Debian's munge 0.5.15 listens with a backlog of 256 and its clients give up
    # at once when that queue is full (connect's EAGAIN, not retried before 0.5.16): 1,024 slurmd
    # on one socket lose launch replies and task exits; a real cluster has one munged per node.
    munge_daemons: int = 1
    # Folders put first on every task's PATH: the bench's interpreter shims.
    task_path: tuple[Path, ...] = ()
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ctld_port: int = 0
    node_port: int = 0

    @property
    def nodes(self) -> list[str]:
        return list(self.stacks)

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def launched_log(self) -> Path:
        return self.folder / "launched.log"

    def env(self) -> dict[str, str]:
        """The environment a Slurm client needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------------ start and stop

    def start(self) -> None:
        for sub in ("state", "spool", "log", "hang"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)
        self._start_munge()
        self.ctld_port = free_port_block(1, 16800)
        self.node_port = free_port_block(len(self.nodes))
        self._write_task_prolog()
        self._write_conf()
        self._spawn([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld")
        for index, node in enumerate(self.nodes):
            conf = self.node_conf(index)
            self._spawn([_which("slurmd"), "-D", "-N", node, "-f", str(conf)], node)
        self.wait_for_nodes()

    def node_conf(self, index: int) -> Path:
        """The slurm.conf of the index-th node: the clients' one, or its munged's copy."""
        daemon = index % self.munge_daemons
        return self.conf if daemon == 0 else self.folder / f"slurm-munge{daemon}.conf"

    def stop(self) -> None:
        """Kill every daemon this cluster started, then every task they left behind."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        # a task a failed test left (only ours, by marker), and the slurmstepd of every step: they
        # leave slurmd's process group, and a step whose slurmd was killed keeps them for good
        for pid in [*self.tasks_running(), *self.step_daemons()]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._stop_munge()

    def _spawn(self, argv: Sequence[str], name: str) -> None:
        with (self.folder / "log" / f"{name}.out").open("ab") as log:  # the child keeps its copy
            self.processes.append(
                subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env(),
                    start_new_session=True,
                )
            )

    def _start_munge(self) -> None:
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for daemon in range(self.munge_daemons):
            name = f"munged{_nth(daemon)}"
            argv = [
                _which("munged"),
                "--force",
                f"--key-file={key}",
                f"--socket={self.munge_socket_of(daemon)}",
                f"--pid-file={self.folder / name}.pid",
                f"--log-file={self.folder / 'log' / name}.log",
                f"--seed-file={self.folder / name}.seed",
            ]
            if self.munge_threads:
                argv.append(f"--num-threads={self.munge_threads}")
            subprocess.run(argv, check=True, capture_output=True)

    def _stop_munge(self) -> None:
        for daemon in range(self.munge_daemons):
            pid_file = self.folder / f"munged{_nth(daemon)}.pid"
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
                pid_file.unlink()

    @property
    def munge_socket(self) -> Path:
        return self.munge_socket_of(0)

    def munge_socket_of(self, daemon: int) -> Path:
        return self.folder / f"munge{_nth(daemon)}.socket"

    # ------------------------------------------------------------------------ configuration

    def _write_conf(self) -> None:
        d = self.folder
        first, last = self.nodes[0], self.nodes[-1]
        prefix = first.rstrip("0123456789")
        ports = f"[{self.node_port}-{self.node_port + len(self.nodes) - 1}]"
        names = f"{prefix}[{first[len(prefix) :]}-{last[len(prefix) :]}]"
        lines = [
            "ClusterName=fleettest",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=@MUNGE_SOCKET@",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}/%n",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log'}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # the nodes of several munged have their own slurm.conf (node_conf), by design
            *(["DebugFlags=NO_CONF_HASH"] if self.munge_daemons > 1 else []),
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "KillWait=2",
            "MinJobAge=5",
            "InactiveLimit=0",
            f"SlurmdTimeout={self.slurmd_timeout_s}",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            f"TaskProlog={d / 'taskprolog.sh'}",
            f"NodeName={names} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports} CPUs=2 "
            "State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP",
        ]
        (d / "plugstack.conf").write_text("")
        text = "\n".join(lines) + "\n"
        for daemon in range(self.munge_daemons):
            socket_path = str(self.munge_socket_of(daemon))
            self.node_conf(daemon).write_text(text.replace("@MUNGE_SOCKET@", socket_path))

    def _write_task_prolog(self) -> None:
        """One `case` arm per node: its PATH, PYTHONPATH and fake nvidia-smi capture."""
        hang_site = self.folder / "hang" / "sitecustomize.py"
        hang_site.write_text(HANG_SITECUSTOMIZE)
        arms = []
        for node, stack in self.stacks.items():
            arms.append(
                f"  {node})\n"
                f"    echo 'export FLEET_FAKE_GPU_DIR={stack.gpu_capture}'\n"
                f"    pythonpath={stack.torch_stub}\n"
                "    ;;\n"
            )
        fakes_bin = Path(__file__).resolve().parents[1] / "fakes" / "bin"
        path = ":".join(str(p) for p in (*self.task_path, fakes_bin))
        script = (
            "#!/bin/sh\n"
            "# Each test node's own fake GPU stack (tests/slurm/cluster.py).\n"
            f'echo "$SLURMD_NODENAME" >> {self.launched_log}\n'
            'case "$SLURMD_NODENAME" in\n' + "".join(arms) + "esac\n"
            f'if [ -e {self.folder}/hang-"$SLURMD_NODENAME" ]; then '
            f'pythonpath="{hang_site.parent}:$pythonpath"; fi\n'
            f'echo "export PATH={path}:$PATH"\n'
            f'echo "export {TASK_MARKER}={self.folder}"\n'
            'echo "export PYTHONPATH=$pythonpath"\n'
        )
        prolog = self.folder / "taskprolog.sh"
        prolog.write_text(script)
        prolog.chmod(0o755)

    # ------------------------------------------------------------------------ controls

    def scontrol(self, *args: str) -> str:
        return self.run("scontrol", *args)

    def run(self, command: str, *args: str, timeout: float = 30) -> str:
        done = subprocess.run(
            [_which(command), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return done.stdout

    @contextlib.contextmanager
    def stacks_replaced(self, stacks: Mapping[str, NodeStack]) -> Iterator[None]:
        """Tasks launched meanwhile get these stacks (the task prolog is read at every launch)."""
        saved, self.stacks = self.stacks, stacks
        self._write_task_prolog()
        try:
            yield
        finally:
            self.stacks = saved
            self._write_task_prolog()

    def drain(self, node: str, reason: str) -> None:
        self.scontrol("update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        self.scontrol("update", f"nodename={node}", "state=resume")

    def set_hang(self, node: str, hang: bool) -> None:
        flag = self.folder / f"hang-{node}"
        if hang:
            flag.touch()
        else:
            flag.unlink(missing_ok=True)

    def wait_for_nodes(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every node is idle (registered with slurmctld)."""
        deadline = time.monotonic() + timeout_s
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            try:
                states = self.node_states()
            except subprocess.SubprocessError:
                states = {}
            if states and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"slurm nodes not idle within {timeout_s} s: {states}; see {self.folder}/log"
        )

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-N", "-h", "-o", "%N %T", timeout=10)
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_until_no_jobs(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-o", "%i").strip():
                return
            time.sleep(0.3)
        raise RuntimeError("jobs still queued: " + self.run("squeue"))

    def tasks_running(self) -> list[int]:
        """Pids of processes that a task of this cluster started (its marker is in their environment)."""
        marker = f"{TASK_MARKER}={self.folder}".encode()
        return _pids_where(lambda environ: marker in environ)

    def step_daemons(self) -> list[int]:
        """Pids of this cluster's slurmstepd: their SLURM_CONF is their slurmd's slurm.conf (one
        of node_conf's, all in this cluster's folder)."""
        ours = f"SLURM_CONF={self.folder}/".encode()
        return _pids_where(lambda environ: any(e.startswith(ours) for e in environ), b"slurmstepd")

    def wait_until_no_tasks(self, timeout_s: float = 20) -> list[int]:
        """The tasks still running after `timeout_s` (empty when all ended in time)."""
        deadline = time.monotonic() + timeout_s
        while (left := self.tasks_running()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def launched(self) -> list[str]:
        """Nodes whose task prolog ran since the last `reset_launched`."""
        return self.launched_log.read_text().split() if self.launched_log.exists() else []

    def reset_launched(self) -> None:
        self.launched_log.unlink(missing_ok=True)


def _pids_where(matches: Callable[[list[bytes]], bool], command: bytes = b"") -> list[int]:
    """Pids of the processes we may read whose command line starts with `command` and whose
    environment entries `matches` accepts."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if command and not (entry / "cmdline").read_bytes().startswith(command):
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if matches(environ.split(b"\0")):
            found.append(int(entry.name))
    return found


def _nth(daemon: int) -> str:
    """The suffix of the daemon-th munged's files: none for the first (the one-munged names)."""
    return str(daemon) if daemon else ""
