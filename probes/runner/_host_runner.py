"""The host runner: executes the probes of one bundle on one host, one forked child per probe.

The controller (fleet/execution/bundle.py) sends this file, prefixed with a start-up alarm line
and a `BUNDLE = {...}` literal holding the probe sources and options, on the stdin of
`<python> -S -c LAUNCHER` (fleet/transport/launch.py: the launcher sets that alarm before `site`
runs, then runs the script as `__main__`; a POSIX-sh wrapper around the interpreter ends it from
outside if it never gets that far). Nothing is written to disk.

Protocol, one JSON object per line on stdout:
    {"type": "hello", "protocol": 1, "python": "3.12.3", "executable": ..., "pid": ...}
    {"type": "tick", "running": [names]}          every second (a closed channel shows as EPIPE)
    {"type": "probe", "name", "status", "ok", "data", "error", "elapsed_s", "output_tail"}
        and "traceback" when the probe raised: the tail of its traceback (its last frames)
    {"type": "done", "elapsed_s": ...}
    {"type": "deadline", "pending": [names]}      instead of done: the bundle's deadline fired

Why a fork per probe: a probe that segfaults, hangs, floods stdout or prints non-UTF-8 bytes must cost
only itself. Each child gets its own process group (so its subprocesses die with it), its stdout and
stderr go to a pipe whose tail is kept, and its result comes back on a separate pipe.

The runner is this file and its RUNNER_MODULES beside it (the forked child, the probe processes,
the fork server, secret masking): the bundle carries their text once (`BUNDLE["runner_modules"]`)
and this file makes them importable from memory before it imports them.

Run by hand (`python3 probes/runner/_host_runner.py`) it runs every probe file of probes/ (the
folder above its own), with the helpers their SHIPS name from probes/helpers/*/, as a bundle
would, and imports its modules from its own folder. Stdlib only, Python 3.8+.
"""

import contextlib
import json
import linecache
import os
import re
import selectors
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn, Optional, Set

# The runner's own modules, beside this file. Read by the controller (fleet/execution/bundle.py)
# as SHIPS is read from a probe: the bundle carries each one's text, once.
RUNNER_MODULES = (
    "_runner_secrets.py",
    "_runner_child.py",
    "_runner_processes.py",
    "_runner_preload.py",
)


class ShippedModules(object):
    """Makes each shipped helper file (`_name.py`) importable as `_name`, from memory: nothing is
    written on the host. Installed first on sys.meta_path before any probe forks, so every probe
    (and its preloader) finds one copy per bundle; run by hand, the probes' folder serves them.
    The runner's own modules are served so too, by one of their own."""

    def __init__(self, texts: Dict[str, str], folder: str) -> None:
        self.texts = dict((f[:-3], (f, t)) for f, t in texts.items() if f.endswith(".py"))
        self.folder = folder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.texts:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> None:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        file_name, text = self.texts[module.__name__]
        filename = self.folder + "/" + file_name
        module.__file__ = filename
        # the source a traceback quotes: the file is on the controller, not here
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), module.__dict__)


def make_runner_modules_importable() -> None:
    """The bundle's runner modules, importable by name before this file imports them: served
    from memory, first on sys.meta_path (nothing is written on the host). Run by hand there is
    no BUNDLE, and they are found in this file's folder, sys.path[0]."""
    texts = (globals().get("BUNDLE") or {}).get("runner_modules")
    if texts:
        sys.meta_path.insert(0, ShippedModules(texts, "probes"))


if __name__ == "__main__":
    # Nothing is written on the host: no __pycache__ beside the modules the probes import (nor,
    # run by hand, beside the runner's own), in this process, its forked probes or any Python
    # they start. Set before the runner's modules are imported.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
make_runner_modules_importable()

if TYPE_CHECKING:  # mypy reads them as probes' modules; on the host they are top-level modules
    from probes.runner._runner_child import PATHS, SHIPPED, Options, read_inits_cuda
    from probes.runner._runner_preload import Preloader, become_subreaper
    from probes.runner._runner_processes import ChildExits, Message, ProbeProcess
else:
    from _runner_child import PATHS, SHIPPED, Options, read_inits_cuda
    from _runner_preload import Preloader, become_subreaper
    from _runner_processes import ChildExits, Message, ProbeProcess


PROTOCOL = 1
HEARTBEAT_S = 1.0
DEFAULT_PARALLEL = 4
# Set by the Slurm transport: srun --label cuts lines longer than 1 KiB into labelled pieces, so
# each protocol line longer than this many bytes goes out as pieces that say they are continued
# (CONTINUED first: JSON text is ASCII and escapes control characters, so it never starts so).
FOLD_LINES_AT = int(os.environ.get("FLEET_FOLD_LINES") or 0)
CONTINUED = b"\x1e"
# Set by the Slurm transport too: one srun carries every node's lines, each costing the controller's
# srun and fleet, while a tick that repeats the previous one tells the controller nothing (srun knows
# the task is alive): only ticks whose running probes changed are written.
TICKS_ON_CHANGE = os.environ.get("FLEET_TICKS") == "on-change"
LAST_TICK: List[Dict[str, Any]] = []  # the last tick written, when TICKS_ON_CHANGE


# Annotations are evaluated at run time on the host (no `from __future__ import annotations`: the
# bundle puts its BUNDLE literal above this file), so they use typing's names, valid on 3.8.
if TYPE_CHECKING:  # typing.TypedDict is 3.8+: the runner still starts on 3.6/3.7, to say so
    from typing import TypedDict

    class _BundleRequired(TypedDict):
        probes: Dict[str, str]  # probe name -> source

    class Bundle(_BundleRequired, total=False):
        """The BUNDLE literal the controller puts above this file (fleet/execution/bundle.py)."""

        options: Dict[str, Options]  # probe name -> its options
        runner_modules: Dict[str, str]  # RUNNER_MODULES file name -> text
        modules: Dict[str, str]  # SHIPS file name -> text, once per bundle
        ships: Dict[str, List[str]]  # probe name -> the SHIPS file names it declared
        paths: Dict[str, str]  # probe name -> its file on the controller, for tracebacks
        deadline_s: float
        parallel: int
        preload: bool
else:
    Bundle = dict


def emit(message: Message) -> None:
    """Write one protocol line; a closed channel (EPIPE) ends the run and kills every probe."""
    if TICKS_ON_CHANGE and message.get("type") == "tick":
        if message in LAST_TICK:  # the running probes of the last tick written
            return
        LAST_TICK[:] = [message]
    line = fold((json.dumps(message, sort_keys=True, default=repr) + "\n").encode("ascii"))
    try:
        while line:
            written = os.write(1, line)
            line = line[written:]
    except OSError:
        raise ChannelClosed() from None


def fold(line: bytes, width: int = FOLD_LINES_AT) -> bytes:
    """`line` as pieces of at most `width` bytes, each but the last marked CONTINUED."""
    if not width or len(line) <= width:
        return line
    body = line[:-1]
    pieces = [body[i : i + width] for i in range(0, len(body), width)]
    return b"".join(CONTINUED + p + b"\n" for p in pieces[:-1]) + pieces[-1] + b"\n"


class ChannelClosed(Exception):
    """The controller went away: nobody reads our output any more."""


class DeadlineHit(Exception):
    """The bundle's own deadline fired (signal.alarm), or the controller sent a signal."""


def read_run_alone(source: str) -> bool:
    return re.search(r"^RUN_ALONE\s*=\s*True\b", source, re.MULTILINE) is not None


def read_preload(source: str) -> List[str]:
    """The modules a probe declares with `PRELOAD = ("torch",)`."""
    match = re.search(r"^PRELOAD\s*=\s*\(([^)]*)\)", source, re.MULTILINE)
    return re.findall(r"[\"']([A-Za-z0-9_.]+)[\"']", match.group(1)) if match else []


def read_ships(source: str) -> List[str]:
    """The helper files a probe declares with `SHIPS = ("_helper.py",)`."""
    match = re.search(r"^SHIPS\s*=\s*\(([^)]*)\)", source, re.MULTILINE)
    return re.findall(r"[\"']([A-Za-z0-9_.]+)[\"']", match.group(1)) if match else []


def install_shipped(bundle: "Bundle") -> None:
    """The bundle's helper files: importable by module name, and per probe as `__shipped__`."""
    modules = bundle.get("modules") or {}
    for name, file_names in (bundle.get("ships") or {}).items():
        SHIPPED[name] = dict((f, modules[f]) for f in file_names if f in modules)
    if modules:
        any_path = next(iter((bundle.get("paths") or {}).values()), "probes/x.py")
        sys.meta_path.insert(0, ShippedModules(modules, os.path.dirname(any_path) or "probes"))


class Scheduler:
    """Runs the probes, `parallel` at a time; RUN_ALONE probes last and one by one."""

    def __init__(
        self,
        probes: Dict[str, str],
        options: Dict[str, Options],
        parallel: int,
        preload: bool = True,
    ) -> None:
        shared = [n for n in probes if not read_run_alone(probes[n])]
        # those that initialise CUDA first: with their own imports they are the longest to run
        shared.sort(key=lambda n: not read_inits_cuda(probes[n]))
        alone = [n for n in probes if read_run_alone(probes[n])]
        self.queue = shared + alone
        self.alone = set(alone)
        self.probes, self.options, self.parallel = probes, options, max(1, parallel)
        self.running: Dict[str, ProbeProcess] = {}
        self.selector = selectors.DefaultSelector()
        self.child_exits = ChildExits()
        self.selector.register(self.child_exits.read_fd, selectors.EVENT_READ, self.child_exits)
        self.preloader: Optional[Preloader] = None
        self.adopted: Set[str] = set()  # preloaded probes: they do not count against `parallel`
        if preload:
            self.start_preloaded([n for n in shared if read_preload(probes[n])])

    def start_preloaded(self, names: List[str]) -> None:
        """Hand the probes that share heavy imports to a Preloader (when we can adopt them)."""
        modules = sorted({m for n in names for m in read_preload(self.probes[n])})
        if len(names) < 2 or not become_subreaper():
            return  # one probe gains nothing from it
        procs = [
            ProbeProcess(n, self.probes[n], self.options.get(n) or {}, fork=False) for n in names
        ]
        self.preloader = Preloader(procs, modules)
        self.adopted = set(names)
        self.selector.register(self.preloader.status_fd, selectors.EVENT_READ, self.preloader)
        for proc in procs:
            self.queue.remove(proc.name)
            self.running[proc.name] = proc
            self.selector.register(proc.result_fd, selectors.EVENT_READ, proc)
            self.selector.register(proc.output_fd, selectors.EVENT_READ, proc)

    def preloader_finished(self) -> None:
        """Probes the preloader never forked (it died) start again, the ordinary way, first."""
        preloader, self.preloader = self.preloader, None
        assert preloader is not None  # only called while one runs
        self.selector.unregister(preloader.status_fd)
        preloader.stop()
        for name in sorted(preloader.pending, reverse=True):
            proc = self.running.pop(name)
            self.adopted.discard(name)
            for fd in (proc.result_fd, proc.output_fd):
                self.drain(proc, fd, final=False)
            self.queue.insert(0, name)

    def start_ready(self) -> None:
        while self.queue and len(set(self.running) - self.adopted) < self.parallel:
            name = self.queue[0]
            if self.running and (name in self.alone or self.alone & set(self.running)):
                return
            self.queue.pop(0)
            self.start(name)

    def start(self, name: str) -> None:
        proc = ProbeProcess(name, self.probes[name], self.options.get(name) or {})
        self.running[name] = proc
        self.selector.register(proc.result_fd, selectors.EVENT_READ, proc)
        self.selector.register(proc.output_fd, selectors.EVENT_READ, proc)

    def finish(self, proc: ProbeProcess, timed_out: bool = False) -> None:
        if timed_out:
            proc.kill()
        for fd in (proc.result_fd, proc.output_fd):
            self.drain(proc, fd, final=not timed_out)
        proc.kill()  # reap, and take down anything it left running in its group
        del self.running[proc.name]
        emit(proc.report(timed_out))

    def drain(self, proc: ProbeProcess, fd: int, final: bool) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(fd)
        if final and fd == proc.result_fd:
            while proc.on_readable(fd):
                pass
        os.close(fd)

    def step(self, wait_s: float) -> None:
        """Read what is ready within `wait_s`, then finish the probes that exited or timed out."""
        for key, _ in self.selector.select(timeout=wait_s):
            self.on_ready(key)
        self.finish_ended(time.monotonic())

    def on_ready(self, key: selectors.SelectorKey) -> None:
        if key.data is self.child_exits:
            self.child_exits.drain()
        elif self.preloader is not None and key.data is self.preloader:
            if not self.preloader.on_readable():
                self.preloader_finished()
        else:
            self.read_probe(key.data, key.fd)

    def read_probe(self, proc: ProbeProcess, fd: int) -> None:
        if self.running.get(proc.name) is not proc:
            return  # its pipes were closed earlier in this round (handed back to the queue)
        if not proc.on_readable(fd):
            self.selector.unregister(fd)

    def finish_ended(self, now: float) -> None:
        for proc in list(self.running.values()):
            if self.running.get(proc.name) is not proc:
                continue  # handed back to the queue while we went round
            if proc.poll_exit():
                self.finish(proc)
            elif now >= proc.deadline:
                if proc.pid is None and self.preloader is not None:
                    self.preloader.pending.discard(proc.name)
                    self.preloader_finished()  # its import hangs: stop it, restart the others
                self.finish(proc, timed_out=True)

    def kill_all(self) -> None:
        if self.preloader is not None:
            self.preloader.stop()
        for proc in self.running.values():
            proc.kill()

    def close(self) -> None:
        self.selector.close()
        self.child_exits.close()


def clean_sys_path(script_dir: Optional[str] = None) -> None:
    """Drop the current folder ('' under the launcher's `python -c`) and this script's folder from
    sys.path, so a `torch/` in the login folder, or probes/torch.py itself when run by hand, never
    shadows the real package the probes are looking at."""
    sys.path[:] = [p for p in sys.path if p not in ("", ".", script_dir)]


def run_bundle(bundle: Bundle) -> int:
    started = time.monotonic()
    install_deadline(float(bundle.get("deadline_s") or 300))
    install_shipped(bundle)
    PATHS.update(bundle.get("paths") or {})
    emit(
        {
            "type": "hello",
            "protocol": PROTOCOL,
            "python": "%d.%d.%d" % sys.version_info[:3],
            "executable": sys.executable,
            "pid": os.getpid(),
        }
    )
    scheduler = Scheduler(
        bundle["probes"],
        bundle.get("options") or {},
        int(bundle.get("parallel") or DEFAULT_PARALLEL),
        preload=bundle.get("preload", True),
    )
    last_tick = started
    try:
        while scheduler.queue or scheduler.running:
            scheduler.start_ready()
            scheduler.step(HEARTBEAT_S / 4)
            if time.monotonic() - last_tick >= HEARTBEAT_S:
                emit({"type": "tick", "running": sorted(scheduler.running)})
                last_tick = time.monotonic()
    except (ChannelClosed, DeadlineHit) as exc:
        scheduler.kill_all()
        if isinstance(exc, DeadlineHit):
            try_emit({"type": "deadline", "pending": sorted(scheduler.running) + scheduler.queue})
        return 124
    finally:
        scheduler.close()
    emit({"type": "done", "elapsed_s": round(time.monotonic() - started, 3)})
    return 0


def try_emit(message: Message) -> None:
    with contextlib.suppress(ChannelClosed):
        emit(message)


def install_deadline(seconds: float) -> None:
    """Our own deadline: sshd may refuse to signal us, and a closed channel alone would not stop us."""

    stopping = (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

    def on_signal(signum: int, frame: object) -> NoReturn:
        # once: the same stop often comes twice (the controller's killpg, and `timeout` passing
        # it on to us and our group), and a second DeadlineHit would cut short kill_all()
        for other in stopping:
            signal.signal(other, signal.SIG_IGN)
        raise DeadlineHit()

    for signum in stopping:
        signal.signal(signum, on_signal)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed channel shows up as EPIPE in emit()
    wanted = max(1, int(seconds + 0.999))
    # the launcher's start-up alarm, set to the same deadline: keep its clock
    left = signal.alarm(0)
    signal.alarm(min(wanted, left) if left else wanted)


def bundle_from_directory(directory: str) -> Bundle:
    """By hand: every probe file in `directory` (probes/), with default options; the helpers
    they ship are read from its helpers/FAMILY/ folders (fleet/shipped.py says why)."""
    names = sorted(f[:-3] for f in os.listdir(directory) if f.endswith(".py") and f[0] not in "_.")
    probes: Dict[str, str] = {}
    modules: Dict[str, str] = {}
    ships: Dict[str, List[str]] = {}
    for name in names:
        with open(os.path.join(directory, name + ".py")) as handle:
            probes[name] = handle.read()
        ships[name] = read_ships(probes[name])
        for file_name in ships[name]:
            with open(helper_path(directory, file_name)) as handle:
                modules[file_name] = handle.read()
    return {"probes": probes, "modules": modules, "ships": ships, "options": {}, "deadline_s": 600}


def helper_path(directory: str, file_name: str) -> str:
    """Where helper `file_name` is: in a family folder of directory/helpers/, else beside the
    probes."""
    helpers = os.path.join(directory, "helpers")
    families = sorted(os.listdir(helpers)) if os.path.isdir(helpers) else []
    for family in families:
        candidate = os.path.join(helpers, family, file_name)
        if os.path.isfile(candidate):
            return candidate
    return os.path.join(directory, file_name)


if __name__ == "__main__":
    if "BUNDLE" not in globals():
        RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))
        BUNDLE = bundle_from_directory(os.path.dirname(RUNNER_DIR))
        clean_sys_path(RUNNER_DIR)
    else:
        clean_sys_path()
    sys.exit(run_bundle(BUNDLE))
