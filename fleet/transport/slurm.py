"""Runs a script (the probe bundle, a fabric group's ranks) on Slurm nodes: ONE srun step for all
of them, one task per node.

Why one shared step behind the per-host `execute` (and not a batch API in the fan-out): the fan-out's
per-host deadline, interruption, output cap, decoding and events then work for Slurm exactly as for
SSH, and only this module knows that the hosts share a process. The first `execute` starts the step
for every node the transport was built with; each `execute` attaches its sink to its own node's
stream and awaits its own node's end. When every node has finished or been given up (a deadline,
Ctrl-C), or at `close()`, the step is stopped, so nothing keeps running on any node.

How one srun carries many nodes' output: `--label` prefixes each line with the task id, and a small
`sh -c` wrapper around the interpreter says, on each node, which node and step it is
(`\\x1dstart NODE JOB STEP`) before the bundle runs and how the interpreter ended (`\\x1dexit N`, on
stdout and stderr) after. srun also cuts lines longer than 1 KiB into labelled pieces, so the host
runner folds its long lines into pieces that say they are continued (FLEET_FOLD_LINES; see
probes/runner/_host_runner.py) and the demultiplexer joins them again.

What srun carries costs the controller once per node: srun sends its stdin to every node in 1 KiB
messages, so the script goes compressed (fleet.transport.launch.compressed_script, started by
ZLIB_LAUNCHER).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.errors import HostError, UnavailableError, UnreachableError, UsageError
from fleet.hostsets import compact_hosts
from fleet.inventory.slurm import SlurmCluster, SlurmNode
from fleet.models import Host
from fleet.transport.base import (
    DEFAULT_OUTPUT_LIMIT,
    READ_CHUNK,
    STDERR_TAIL_BYTES,
    ExecResult,
    ExecuteSession,
    HandshakeSlot,
    OutputSink,
    Session,
)
from fleet.transport.launch import ZLIB_LAUNCH_ARGS, compressed_script

FOLD_LINES_AT = 1000  # < srun's 1 KiB line pieces, with room for the marker and newline
CONTROL = b"\x1d"
CONTINUED = b"\x1e"
LABEL = re.compile(rb"^ *(\d+): ?")
# Runs on each node: say which node and step this task is, run the bundle (told its host's name in
# FLEET_HOST: a script shared by several nodes picks its part by it; told to fold long lines and to
# write only the ticks that say something new, see probes/runner/_host_runner.py), say how it ended.
# "$0" "$@" is the interpreter and ZLIB_LAUNCH_ARGS (fleet.transport.launch); stdin (the
# compressed script) is inherited. The `exit` marks start no line of their own: after an
# unterminated last line they end it (SlurmStep._line splits there), one line fewer per stream for
# srun to carry (every line is a message that wakes srun's poll over all N nodes' sockets).
WRAPPER = (
    r'printf "\035start %s %s %s\n" "$SLURMD_NODENAME" "$SLURM_JOB_ID" "$SLURM_STEP_ID"; '
    f'FLEET_FOLD_LINES={FOLD_LINES_AT} FLEET_TICKS=on-change FLEET_HOST="$SLURMD_NODENAME" '
    '"$0" "$@"; s=$?; '
    r'printf "\035exit %s\n" "$s"; printf "\035exit %s\n" "$s" >&2'
)
INTERRUPT_GAP_S = 0.2  # srun: a second SIGINT within one second ends the step
STOP_GRACE_S = 4.0
# Once every task has said how it ended, srun only collects their exits: it gets this long to end
# by itself before it is interrupted (see SlurmStep.stop).
EXIT_GRACE_S = 4.0
SRUN_MESSAGES_TAIL = 20


@dataclass(frozen=True)
class SlurmOptions:
    """How the step is asked for. `gpus`: "exclusive" (whole nodes: every GPU, under cgroups
    too), "none", or a number N (--gpus-per-node=N). `extra_args`: the site's --slurm-args."""

    gpus: str = "exclusive"
    extra_args: tuple[str, ...] = ()
    deadline_s: float = 120.0  # the per-host deadline: bounds the step's --time
    srun: str = "srun"
    scancel: str = "scancel"


def parse_slurm_args(text: str | None) -> tuple[str, ...]:
    """`--slurm-args '--account=a --qos=high'` → argv items (shlex rules, never a shell)."""
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise UsageError(f"--slurm-args {text!r}: {exc}", hint="quote it as a shell would") from exc


def gpu_request(mode: str, in_job: bool) -> list[str]:
    """srun options that give the task the node's GPUs (inside a job: the job's, by default)."""
    if mode == "none" or (in_job and mode == "exclusive"):
        return []
    if mode == "exclusive":
        return ["--exclusive"]
    if mode.isdigit() and int(mode) > 0:
        return [f"--gpus-per-node={int(mode)}"]
    raise UsageError(
        f"--slurm-gpus {mode!r} is not a GPU request", hint="use exclusive, none or a number"
    )


def srun_argv(
    cluster: SlurmCluster, nodes: Sequence[str], python: str, options: SlurmOptions
) -> list[str]:
    """The one srun command line: one task per node, the script broadcast on stdin (compressed:
    `compressed_script`)."""
    minutes = max(1, math.ceil(options.deadline_s / 60) + 1)  # Slurm counts whole minutes
    where = ["--jobid", cluster.job_id, "--overlap"] if cluster.job_id else ["--job-name=fleet"]
    return [
        options.srun,
        *where,
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={compact_hosts(nodes).replace(', ', ',')}",
        "--label",
        "--input=all",
        "--kill-on-bad-exit=0",
        "--wait=0",
        f"--time={minutes}",
        f"--immediate={max(1, math.ceil(options.deadline_s / 2))}",
        "--export=NONE",
        *gpu_request(options.gpus, cluster.job_id is not None),
        *options.extra_args,
        "/bin/sh",
        "-c",
        WRAPPER,
        python,
        *ZLIB_LAUNCH_ARGS,
    ]


# ------------------------------------------------------------------------------ one node's share


@dataclass
class NodeStream:
    """One node's part of the step: stdout lines to its sink (buffered until `execute` attaches
    one), its stderr tail, and how it ended."""

    name: str
    ended: asyncio.Future[ExecResult]
    sink: OutputSink | None = None
    buffered: list[bytes] = field(default_factory=list)
    buffered_bytes: int = 0
    started: bool = False
    job_id: str | None = None
    step_id: str | None = None
    exit_marks: int = 0
    exit_status: int | None = None
    stderr_tail: str = ""
    wrote_stdout: bool = False  # a line of the task's own stdout arrived (hello, at least)
    _partial: bytes = b""
    _refused: bool = False

    def attach(self, sink: OutputSink) -> None:
        self.sink = sink
        for chunk in self.buffered:
            self._deliver(chunk)
        self.buffered.clear()

    def stdout_line(self, payload: bytes) -> None:
        self.wrote_stdout = True
        if payload.startswith(CONTINUED):
            self._partial += payload[1:]
            return
        line, self._partial = self._partial + payload + b"\n", b""
        if self.sink is None:
            if self.buffered_bytes <= DEFAULT_OUTPUT_LIMIT:  # past it the sink refuses anyway
                self.buffered.append(line)
                self.buffered_bytes += len(line)
            return
        self._deliver(line)

    def _deliver(self, line: bytes) -> None:
        if self._refused or self.sink is None:
            return
        if not self.sink(line):  # over the output cap: this host is done, the others go on
            self._refused = True
            self.finish(ExecResult(exit_status=None, stderr_tail=self.stderr_tail))

    def stderr_line(self, payload: bytes) -> None:
        text = payload.decode("utf-8", "replace")
        self.stderr_tail = (self.stderr_tail + text + "\n")[-STDERR_TAIL_BYTES:]

    def exit_mark(self, status: str) -> None:
        """`exit N` arrives on stdout and on stderr: both streams are complete after the second."""
        self.exit_marks += 1
        self.exit_status = int(status) if status.isdigit() else None
        if self.exit_marks >= 2:
            self.finish(exit_result(self.exit_status, self.stderr_tail))

    def finish(self, result: ExecResult) -> None:
        if not self.ended.done():
            self.ended.set_result(result)

    def fail(self, error: HostError) -> None:
        if not self.ended.done():
            self.ended.set_exception(error)
            self.ended.exception()  # retrieved: a host nobody awaits any more is no warning


def exit_result(status: int | None, stderr: str) -> ExecResult:
    """The wrapper's `$?`: above 128 the interpreter was killed by signal N-128."""
    if status is not None and status > 128:
        with contextlib.suppress(ValueError):
            return ExecResult(None, signal.Signals(status - 128).name, stderr)
    return ExecResult(exit_status=status, stderr_tail=stderr)


# ------------------------------------------------------------------------------ the step


class SlurmStep:
    """One srun process and the demultiplexing of its labelled output into NodeStreams."""

    def __init__(self, argv: Sequence[str], nodes: Sequence[str], options: SlurmOptions) -> None:
        self.argv, self.options = list(argv), options
        loop = asyncio.get_running_loop()
        self.streams = {n: NodeStream(n, loop.create_future()) for n in nodes}
        self.tasks: dict[int, NodeStream] = {}  # srun task id → node, from each `start` line
        self.early: dict[int, list[tuple[bool, bytes]]] = {}  # lines before a task's `start`
        self.srun_messages: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._waiter: asyncio.Task[None] | None = None
        self.done: asyncio.Future[None] = loop.create_future()

    @property
    def job_id(self) -> str | None:
        return next((s.job_id for s in self.streams.values() if s.job_id), None)

    @property
    def step_id(self) -> str | None:
        return next((s.step_id for s in self.streams.values() if s.step_id), None)

    async def start(self, script: bytes) -> None:
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # the terminal's Ctrl-C is ours to relay, not srun's
            )
        except OSError as exc:
            self._fail_all(UnreachableError(f"cannot start {self.argv[0]}: {exc.strerror}"))
            self.done.set_result(None)
            return
        assert self.process.stdout
        assert self.process.stderr
        self._readers = [
            asyncio.ensure_future(self._read(self.process.stdout, stdout=True)),
            asyncio.ensure_future(self._read(self.process.stderr, stdout=False)),
            asyncio.ensure_future(self._feed(script)),
        ]
        self._waiter = asyncio.ensure_future(self._wait())

    async def _feed(self, script: bytes) -> None:
        assert self.process
        assert self.process.stdin
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.process.stdin.write(script)
            await self.process.stdin.drain()
            self.process.stdin.close()

    async def _read(self, reader: asyncio.StreamReader, stdout: bool) -> None:
        partial = b""
        while chunk := await reader.read(READ_CHUNK):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                self._line(line, stdout)
        if partial:
            self._line(partial, stdout)

    def _line(self, line: bytes, stdout: bool) -> None:
        match = LABEL.match(line)
        if match is None:  # srun's own words: errors, queueing, cancellation
            if line.strip() and not stdout:
                text = line.decode("utf-8", "replace").strip()
                self.srun_messages = [*self.srun_messages, text][-SRUN_MESSAGES_TAIL:]
            return
        task, payload = int(match.group(1)), line[match.end() :]
        mark = payload.find(CONTROL)
        if mark >= 0:  # a marker, maybe after the unterminated last line of the task's output
            if mark > 0:
                self._payload(task, payload[:mark], stdout)
            self._control(task, payload[mark + 1 :].decode("ascii", "replace").split())
            return
        self._payload(task, payload, stdout)

    def _payload(self, task: int, payload: bytes, stdout: bool) -> None:
        """One line of a task's own output (label and markers removed) to its node's stream."""
        stream = self.tasks.get(task)
        if stream is None:
            self.early.setdefault(task, []).append((stdout, payload))
        elif stdout:
            stream.stdout_line(payload)
        else:
            stream.stderr_line(payload)

    def _control(self, task: int, words: list[str]) -> None:
        if words[:1] == ["start"] and len(words) >= 2 and words[1] in self.streams:
            stream = self.streams[words[1]]
            stream.started, stream.job_id = True, _word(words, 2)
            stream.step_id = _word(words, 3)
            self.tasks[task] = stream
            for stdout, payload in self.early.pop(task, []):
                (stream.stdout_line if stdout else stream.stderr_line)(payload)
        elif words[:1] == ["exit"] and task in self.tasks:
            self.tasks[task].exit_mark(_word(words, 1) or "")

    async def _wait(self) -> None:
        assert self.process
        await asyncio.gather(*self._readers, return_exceptions=True)
        await self.process.wait()
        self._conclude_unfinished()
        if not self.done.done():
            self.done.set_result(None)

    def _conclude_unfinished(self) -> None:
        """srun ended: a node that never started sent nothing (an error naming it); one that
        started but never said how it ended lost its connection: before its runner wrote a line
        it is unreachable (srun's words are not the interpreter's: read as its stderr, they made
        it look like a Python that could not run the probes), after, what it wrote is kept."""
        why = "; ".join(self.srun_messages[-3:]) or f"srun exit status {self._srun_status()}"
        silent = [s.name for s in self.streams.values() if not s.started]
        for stream in self.streams.values():
            if not stream.started:
                stream.fail(_sent_nothing(stream.name, silent, why))
            elif not stream.wrote_stdout:
                stream.fail(_lost_before_output(stream, why))
            else:
                stream.finish(ExecResult(None, stderr_tail=stream.stderr_tail + why))

    def all_ended(self) -> bool:
        """Every node's task said how it ended, on stdout and stderr."""
        return all(s.exit_marks >= 2 for s in self.streams.values())

    def _srun_status(self) -> int | None:
        return self.process.returncode if self.process else None

    def _fail_all(self, error: HostError) -> None:
        for stream in self.streams.values():
            stream.fail(error)

    # -------------------------------------------------------------------------- stopping

    async def stop(self) -> None:
        """End the step and wait for srun: two SIGINTs (srun then signals the tasks and kills
        them), then scancel of the step, then SIGKILL to srun as the last resort. When every task
        has already said how it ended, srun first gets EXIT_GRACE_S to end by itself: interrupted,
        it cancels the step and every node kills tasks that are ending anyway, work for srun and
        the nodes (and, on a busy node, a kill that is slow to complete drains it: "Kill task
        failed")."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        if self.all_ended() and await _exited(process, EXIT_GRACE_S):
            return
        for _ in range(2):
            _signal(process, signal.SIGINT)
            await asyncio.sleep(INTERRUPT_GAP_S)
        if await _exited(process, STOP_GRACE_S):
            return
        await self._scancel()
        if not await _exited(process, STOP_GRACE_S):
            _signal(process, signal.SIGKILL)
            await process.wait()

    async def _scancel(self) -> None:
        if self.job_id is None or self.step_id is None:
            return
        target = f"{self.job_id}.{self.step_id}"
        with contextlib.suppress(OSError):
            killer = await asyncio.create_subprocess_exec(
                self.options.scancel,
                "--signal=KILL",
                target,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await asyncio.wait_for(killer.wait(), STOP_GRACE_S)


def _word(words: list[str], index: int) -> str | None:
    return words[index] if len(words) > index else None


def _sent_nothing(name: str, silent: list[str], why: str) -> UnreachableError:
    return UnreachableError(
        f"{name} sent nothing: its task of the Slurm step never started",
        context=f"{len(silent)} node(s) silent ({compact_hosts(silent)}): {why}",
        hint="see the node with: scontrol show node " + name,
    )


def _lost_before_output(stream: NodeStream, why: str) -> UnreachableError:
    said = stream.stderr_tail.strip().splitlines()[-1:]
    return UnreachableError(
        f"lost {stream.name}: the Slurm step ended before its task wrote a line",
        context="; ".join([*said, why]),
        hint="see the node with: scontrol show node " + stream.name,
    )


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


async def _exited(process: asyncio.subprocess.Process, wait_s: float) -> bool:
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), wait_s)
    except asyncio.TimeoutError:
        return False
    return True


# ------------------------------------------------------------------------------ the transport


class SlurmTransport:
    """The Transport for `transport: slurm` hosts: see the module docstring."""

    def __init__(self, cluster: SlurmCluster, hosts: Sequence[Host], options: SlurmOptions) -> None:
        self.cluster, self.options = cluster, options
        self.launch = [h for h in hosts if self._node(h.name).usable]
        self.step: SlurmStep | None = None
        self._script: bytes | None = None
        self._lock = asyncio.Lock()
        self._released: set[str] = set()
        self._stopping: asyncio.Task[None] | None = None

    def _node(self, name: str) -> SlurmNode:
        return self.cluster.by_name.get(name) or SlurmNode(
            name, "unknown", "not in --slurm's nodes", False
        )

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Session:
        return await ExecuteSession.open(self, host, handshake)

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        node = self._node(host.name)
        if not node.usable:
            raise UnavailableError(
                f"Slurm reports {host.name} {node.state}"
                + (f": {node.reason}" if node.reason else ""),
                hint=f"not launched on; see: scontrol show node {host.name}",
            )
        step = await self._step_for(script)
        stream = step.streams.get(host.name)
        if stream is None:
            raise UnreachableError(f"{host.name} is not a node of this run's Slurm step")
        stream.attach(sink)
        try:
            return await asyncio.shield(stream.ended)
        finally:
            self._release(host.name)

    async def _step_for(self, script: bytes) -> SlurmStep:
        async with self._lock:
            if self.step is None:
                self._script = script
                names = [h.name for h in self.launch]
                python = self.launch[0].python
                self.step = SlurmStep(
                    srun_argv(self.cluster, names, python, self.options), names, self.options
                )
                await self.step.start(compressed_script(script))
        if script != self._script:
            raise UsageError(
                "Slurm nodes share one step and so one bundle: per-host probe options differ",
                hint="give every Slurm node the same probe options",
            )
        return self.step

    def _release(self, name: str) -> None:
        """This node's host is done (or given up): once all are, stop the step. Counted, not
        compared as sets: a comparison per host was quadratic (20,000 nodes: 4·10⁸ lookups)."""
        if self.step is None or name not in self.step.streams or name in self._released:
            return
        self._released.add(name)
        if len(self._released) == len(self.step.streams) and self._stopping is None:
            self._stopping = asyncio.ensure_future(self.step.stop())

    async def close(self) -> None:
        if self.step is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.step.stop())
        await asyncio.shield(self._stopping)
        with contextlib.suppress(asyncio.TimeoutError):  # not the builtin one before 3.11
            await asyncio.wait_for(asyncio.shield(self.step.done), STOP_GRACE_S)

    def record(self) -> dict[str, Any]:
        """For the run document: the target, job and step, and each node's Slurm state."""
        streams = self.step.streams if self.step else {}
        nodes = {}
        for node in self.cluster.nodes:
            stream = streams.get(node.name)
            nodes[node.name] = {
                **node.record(),
                "launched": bool(stream and stream.started),
                "job_id": stream.job_id if stream else None,
                "step_id": stream.step_id if stream else None,
            }
        return {
            "target": str(self.cluster.target),
            "job_id": self.step.job_id if self.step else self.cluster.job_id,
            "step_id": self.step.step_id if self.step else None,
            "srun": self.step.argv[: -len(ZLIB_LAUNCH_ARGS) - 4] if self.step else None,
            "usable": sum(1 for n in self.cluster.nodes if n.usable),
            "unavailable": sum(1 for n in self.cluster.nodes if not n.usable),
            "nodes": nodes,
        }
