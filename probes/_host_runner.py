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

Run by hand (`python3 probes/_host_runner.py`) it runs every probe file beside it, as a bundle would.
Stdlib only, Python 3.8+.
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
import traceback
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    NoReturn,
    Optional,
    Pattern,
    Set,
    Tuple,
)

PROTOCOL = 1
HEARTBEAT_S = 1.0
DEFAULT_PROBE_TIMEOUT_S = 60.0
DEFAULT_PARALLEL = 4
RESULT_LIMIT_BYTES = 8 * 1024 * 1024
OUTPUT_TAIL_BYTES = 2048
TRACEBACK_CHARS = 4096  # the tail of a raising probe's traceback that is sent: its last frames
READ_CHUNK = 65536
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
Options = Dict[str, Any]  # one probe's options, handed to its collect()
Message = Dict[str, Any]  # one protocol line
# status, ok, data, error (what the probe said), and the traceback's tail when it raised
Verdict = Tuple[str, bool, Dict[str, Any], Any, str]


if TYPE_CHECKING:  # typing.TypedDict is 3.8+: the runner still starts on 3.6/3.7, to say so
    from typing import TypedDict

    class _BundleRequired(TypedDict):
        probes: Dict[str, str]  # probe name -> source

    class Bundle(_BundleRequired, total=False):
        """The BUNDLE literal the controller puts above this file (fleet/execution/bundle.py)."""

        options: Dict[str, Options]  # probe name -> its options
        modules: Dict[str, str]  # SHIPS file name -> text, once per bundle
        ships: Dict[str, List[str]]  # probe name -> the SHIPS file names it declared
        paths: Dict[str, str]  # probe name -> its file on the controller, for tracebacks
        deadline_s: float
        parallel: int
        preload: bool
else:
    Bundle = dict


# Token-shaped strings never leave the host. The controller imports this list to mask again.
SECRET_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
# For each pattern, substrings of the lower-cased text without which it cannot match: a plain
# substring test is ~100x faster than the regex, so most strings are never searched at all.
SECRET_ANCHORS = (
    ("hf_",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("akia", "asia"),
    ("sk-",),
    ("xox",),
    ("bearer",),
    ("://",),
)
MASK = "***"
# Secrets with no telltale shape (WANDB_API_KEY, AWS_SECRET_ACCESS_KEY are plain hex/base64): the
# values of variables named like secrets are masked wherever they show up (an error message, a
# config dump), on the host that knows them.
SECRET_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)")


def environment_secrets(environ: Mapping[str, str]) -> List[str]:
    """Values of the variables named like secrets, longest first (8 characters or more)."""
    found = set(v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= 8)
    return sorted(found, key=len, reverse=True)


ENV_SECRETS = environment_secrets(os.environ)


def secret_patterns_in(text: str) -> List[Pattern[str]]:
    """The patterns whose anchor occurs in `text` (the only ones worth running)."""
    lowered = text.lower()
    return [
        p
        for p, anchors in zip(SECRET_PATTERNS, SECRET_ANCHORS)
        if any(a in lowered for a in anchors)
    ]


def mask_secrets(value: Any) -> Any:
    """Return `value` (any JSON-like structure) with every token-shaped substring replaced by ***."""
    if isinstance(value, str):
        if not value:  # most error, output and traceback fields: nothing to scan
            return value
        for secret in ENV_SECRETS:
            if secret in value:
                value = value.replace(secret, MASK)
        for pattern in secret_patterns_in(value):
            value = pattern.sub(MASK, value)
        return value
    if isinstance(value, dict):
        return {mask_secrets(k): mask_secrets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v) for v in value]
    return value


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


def read_inits_cuda(source: str) -> bool:
    return re.search(r"^INITS_CUDA\s*=\s*True\b", source, re.MULTILINE) is not None


def read_preload(source: str) -> List[str]:
    """The modules a probe declares with `PRELOAD = ("torch",)`."""
    match = re.search(r"^PRELOAD\s*=\s*\(([^)]*)\)", source, re.MULTILINE)
    return re.findall(r"[\"']([A-Za-z0-9_.]+)[\"']", match.group(1)) if match else []


def read_ships(source: str) -> List[str]:
    """The helper files a probe declares with `SHIPS = ("_helper.py",)`."""
    match = re.search(r"^SHIPS\s*=\s*\(([^)]*)\)", source, re.MULTILINE)
    return re.findall(r"[\"']([A-Za-z0-9_.]+)[\"']", match.group(1)) if match else []


# probe name -> {file name: text}: the SHIPS files of the bundle, handed to each probe in memory
SHIPPED: Dict[str, Dict[str, str]] = {}


class ShippedModules(object):
    """Makes each shipped helper file (`_name.py`) importable as `_name`, from memory: nothing is
    written on the host. Installed first on sys.meta_path before any probe forks, so every probe
    (and its preloader) finds one copy per bundle; run by hand, the probes' folder serves them."""

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


def install_shipped(bundle: "Bundle") -> None:
    """The bundle's helper files: importable by module name, and per probe as `__shipped__`."""
    modules = bundle.get("modules") or {}
    for name, file_names in (bundle.get("ships") or {}).items():
        SHIPPED[name] = dict((f, modules[f]) for f in file_names if f in modules)
    if modules:
        any_path = next(iter((bundle.get("paths") or {}).values()), "probes/x.py")
        sys.meta_path.insert(0, ShippedModules(modules, os.path.dirname(any_path) or "probes"))


# probe name -> its file as the controller names it (myprobes/x.py): its code's file name
PATHS: Dict[str, str] = {}


def probe_file(name: str) -> str:
    return PATHS.get(name) or "probes/%s.py" % name


def read_timeout(source: str) -> float:
    match = re.search(r"^TIMEOUT_S\s*=\s*([0-9.]+)", source, re.MULTILINE)
    return float(match.group(1)) if match else DEFAULT_PROBE_TIMEOUT_S


# ---------------------------------------------------------------------------------------- the child


def child_main(
    name: str, source: str, options: Options, result_fd: int, output_fd: int
) -> NoReturn:
    """In the forked child: run the probe, write its JSON result to result_fd, never return."""
    try:
        os.setpgid(0, 0)
        die_with_parent()
        forget_child_exits()
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        if read_inits_cuda(source):
            start_cuda_init()
        payload = run_probe_source(name, source, options)
    except BaseException as exc:  # the probe's failure is data for the report, whatever it was
        payload = crash_report(name, exc)
    write_all(result_fd, json.dumps(payload, default=repr).encode("utf-8", "surrogateescape"))
    os._exit(0)


def start_cuda_init() -> None:
    """For a probe that declares `INITS_CUDA = True`: the CUDA driver's cuInit (~0.2 s on an H200
    host) starts in a thread while the probe imports torch, so torch's first CUDA call finds it
    done. ctypes releases the GIL for the call. Whatever fails here is left to the probe, which
    makes the same call and reports what it sees."""

    def initialise() -> None:
        try:
            import ctypes

            ctypes.CDLL("libcuda.so.1").cuInit(0)
        except Exception:  # no driver, no GPU: the probe says so itself
            pass

    import threading

    threading.Thread(target=initialise, name="cuInit", daemon=True).start()


def die_with_parent() -> None:
    """If the runner is SIGKILLed, take this probe down too (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except Exception:  # not Linux, or no libc: the runner's own cleanup still applies
        pass


def run_probe_source(name: str, source: str, options: Options) -> Dict[str, Any]:
    filename = probe_file(name)
    namespace: Dict[str, Any] = {"__name__": "fleet_probe_" + name, "__file__": filename}
    namespace["__shipped__"] = dict(SHIPPED.get(name) or {})
    # the source a traceback quotes: the file is on the controller, not here (no mtime: kept)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return {"result": namespace["collect"](options)}


def crash_report(name: str, exc: BaseException) -> Dict[str, Any]:
    """What a raising probe leaves: the exception's last line (`crash`), the innermost line of
    the probe's own file it passed through (`at`, FILE:LINE), and the traceback's tail without
    the runner's own frames (its last TRACEBACK_CHARS, cut at a line)."""
    tb = exc.__traceback__
    runner = child_main.__code__.co_filename
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == runner:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        frames = traceback.extract_tb(tb)
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    except BaseException:  # a frame that cannot be read, a broken exception: say what we can
        last = type(exc).__name__
        text, frames = last + "\n", traceback.StackSummary()
    if len(text) > TRACEBACK_CHARS:
        text = text[-TRACEBACK_CHARS:].partition("\n")[2]
    own = [f for f in frames if f.filename == probe_file(name)] or list(frames)
    at = "%s:%s" % (own[-1].filename, own[-1].lineno) if own else ""
    return {"crash": last, "at": at, "traceback": text}


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


# --------------------------------------------------------------------------------------- the parent


class ProbeProcess:
    """A running probe seen from the parent: its pid, its pipes and what they have said so far."""

    def __init__(self, name: str, source: str, options: Options, fork: bool = True) -> None:
        self.name, self.source, self.options = name, source, options
        self.started = time.monotonic()
        self.deadline = self.started + float(options.get("timeout_s") or read_timeout(source))
        result_r, result_w = os.pipe()
        output_r, output_w = os.pipe()
        self.result_fd, self.output_fd = result_r, output_r
        self.write_fds = (result_w, output_w)
        self.pid: Optional[int] = (
            None  # without fork: the Preloader forks it and says its pid later
        )
        if fork:
            sys.stdout.flush()
            self.pid = os.fork()
            if self.pid == 0:
                os.close(result_r)
                os.close(output_r)
                child_main(name, source, options, result_w, output_w)
            self.close_write_ends()

    def close_write_ends(self) -> None:
        for fd in self.write_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.result = bytearray()
        self.result_overflow = False
        self.output_tail = b""
        self.exit_status: Optional[int] = None

    def on_readable(self, fd: int) -> bool:
        """Read one chunk; return False at end of file."""
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return False
        if fd == self.output_fd:
            self.output_tail = (self.output_tail + chunk)[-OUTPUT_TAIL_BYTES:]
        elif len(self.result) + len(chunk) > RESULT_LIMIT_BYTES:
            self.result_overflow = True
        else:
            self.result.extend(chunk)
        return True

    def poll_exit(self) -> bool:
        if self.exit_status is None and self.pid is not None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # a preloaded probe not yet adopted by us
                return False
            if pid:
                self.exit_status = status
        return self.exit_status is not None

    def kill(self) -> None:
        """Kill the probe and everything it started (its process group), then reap it."""
        if self.pid is None:
            return  # never started: the Preloader that would have forked it is killed instead
        for kill in (os.killpg, os.kill):  # the group, then the probe itself should it have left it
            with contextlib.suppress(OSError):
                kill(self.pid, signal.SIGKILL)
        if self.exit_status is None:
            try:
                self.exit_status = os.waitpid(self.pid, 0)[1]
            except OSError:
                self.exit_status = 0

    def report(self, timed_out: bool = False) -> Message:
        elapsed = round(time.monotonic() - self.started, 3)
        status, ok, data, error, tail = judge(self, timed_out)
        message = {
            "type": "probe",
            "name": self.name,
            "status": status,
            "ok": ok,
            "data": mask_secrets(data),
            "error": mask_secrets(error),
            "elapsed_s": elapsed,
            "output_tail": mask_secrets(self.output_tail.decode("utf-8", "replace")),
        }
        if tail:
            message["traceback"] = mask_secrets(tail)
        return message


def judge(proc: ProbeProcess, timed_out: bool) -> Verdict:
    """Turn what a child left behind into (status, ok, data, error, traceback tail)."""
    if timed_out:
        return (
            "timeout",
            False,
            {},
            "probe timed out after %.0f s" % (proc.deadline - proc.started),
            "",
        )
    status = proc.exit_status or 0
    if os.WIFSIGNALED(status):
        return (
            "failed",
            False,
            {},
            "probe killed by signal %s" % signal_name(os.WTERMSIG(status)),
            "",
        )
    if os.WEXITSTATUS(status) != 0:
        return "failed", False, {}, "probe exited with code %d" % os.WEXITSTATUS(status), ""
    if proc.result_overflow:
        return "failed", False, {}, "probe result larger than %d bytes" % RESULT_LIMIT_BYTES, ""
    return judge_payload(bytes(proc.result))


def judge_payload(raw: bytes) -> Verdict:
    try:
        payload = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return "failed", False, {}, "probe ended without a result", ""
    if "crash" in payload:
        lines = str(payload["crash"]).strip().splitlines()
        raised = lines[-1] if lines else "an exception"
        at = " (%s)" % payload["at"] if payload.get("at") else ""
        tail = payload.get("traceback")
        tail = tail[-TRACEBACK_CHARS:] if isinstance(tail, str) else ""
        return "failed", False, {}, "probe raised %s%s" % (raised, at), tail
    result = payload.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
        return (
            "failed",
            False,
            {},
            "probe returned %.80r, not {'ok': bool, 'data': ...}" % (result,),
            "",
        )
    data = result.get("data")
    if not isinstance(data, dict):
        data = {}
    error = result.get("error")
    return ("ok" if result["ok"] else "absent"), result["ok"], data, error, ""


def signal_name(number: int) -> str:
    try:
        return "%d (%s)" % (number, signal.Signals(number).name)
    except ValueError:
        return str(number)


# ------------------------------------------------------------------------------ child exits


def on_child_exit(signum: int, frame: object) -> None:
    """Nothing to do here: the signal's byte on the wakeup fd is what wakes the scheduler."""


class ChildExits:
    """Wakes the scheduler's select() when a child exits: SIGCHLD, through signal.set_wakeup_fd.

    A probe closes its result pipe a moment before it exits; without this wake-up its exit is only
    seen at the next select() timeout, up to HEARTBEAT_S / 4 later, and the last probe to end is
    on every host's critical path. Where the wakeup fd cannot be set (not the main thread), the
    timeout still finds every exit, only later.
    """

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)
        self.installed = False
        try:
            self.previous_fd = signal.set_wakeup_fd(self.write_fd)
            self.previous_handler = signal.signal(signal.SIGCHLD, on_child_exit)
            self.installed = True
        except ValueError:  # not the main thread
            pass

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.read_fd, 4096):
                pass

    def close(self) -> None:
        if self.installed:
            signal.signal(signal.SIGCHLD, self.previous_handler)
            signal.set_wakeup_fd(self.previous_fd)
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def forget_child_exits() -> None:
    """In a forked child: the runner's wake-up is not ours (a byte from us would wake it)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)


# ------------------------------------------------------------------------------- preloading


class Preloader:
    """A fork server for the probes that declare `PRELOAD = ("torch",)`.

    Four probes importing torch each cost four cold imports (~3–5 s of CPU apiece on a GPU host).
    Instead one child imports the modules once, then forks each of those probes from that warm
    state. The runner becomes their subreaper (PR_SET_CHILD_SUBREAPER), so the probes end up its
    own children and are watched, timed and killed like any other. The preloader never runs probe
    code itself; if it dies (a crash inside `import torch`), its probes are started the ordinary
    way and each reports its own failure: a failed preload costs time, never results.
    """

    def __init__(self, procs: List[ProbeProcess], modules: List[str]) -> None:
        self.procs = {p.name: p for p in procs}
        status_r, status_w = os.pipe()
        runner_pid = os.getpid()
        sys.stdout.flush()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(status_r)
            preloader_main(list(procs), modules, status_w, runner_pid)
        os.close(status_w)
        for proc in procs:
            proc.close_write_ends()
        self.status_fd = status_r
        self.pending = set(self.procs)
        self._buffer = b""

    def on_readable(self) -> bool:
        """Read pid announcements; return False at end of file (the preloader is done or dead)."""
        chunk = os.read(self.status_fd, 4096)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            name, _, pid = line.decode("ascii", "replace").partition(" ")
            if name in self.pending and pid.isdigit():
                self.procs[name].pid = int(pid)
                self.pending.discard(name)
        return bool(chunk)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.status_fd)


def become_subreaper() -> bool:
    """Orphaned descendants get re-parented to us (Linux PR_SET_CHILD_SUBREAPER)."""
    try:
        import ctypes

        status: int = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
        return status == 0
    except Exception:  # not Linux, or no libc: probes are then forked the ordinary way
        return False


def preloader_main(
    procs: List[ProbeProcess], modules: List[str], status_w: int, runner_pid: int
) -> NoReturn:
    """In the preloader: import `modules` once, fork each probe from here, never return."""
    try:
        os.setpgid(0, 0)
        die_with_parent()
        forget_child_exits()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # whatever an import prints must not reach the channel
            os.dup2(devnull, fd)
        for proc in procs:
            os.close(proc.result_fd)
            os.close(proc.output_fd)
        for module in modules:
            try:
                __import__(module)
            except BaseException:  # the probes will meet the same error and report it
                pass
        for proc in procs:
            fork_adopted_probe(proc, procs, status_w, runner_pid)
    finally:
        os._exit(0)


def fork_adopted_probe(
    proc: ProbeProcess, procs: List[ProbeProcess], status_w: int, runner_pid: int
) -> None:
    """Double fork: the middle process exits at once, so the probe is re-parented to the runner."""
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)
        proc.close_write_ends()
        return
    probe_pid = os.fork()
    if probe_pid:
        os.write(status_w, ("%s %d\n" % (proc.name, probe_pid)).encode("ascii"))
        os._exit(0)
    os.setpgid(0, 0)  # at once: stopping the preloader kills its group, and this is not in it
    os.close(status_w)
    for other in procs:
        if other is not proc:
            other.close_write_ends()  # or other probes' pipes would never see end-of-file
    deadline = time.monotonic() + 2.0
    while os.getppid() != runner_pid and time.monotonic() < deadline:
        time.sleep(0.001)
    child_main(proc.name, proc.source, proc.options, *proc.write_fds)


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
        for key, _ in self.selector.select(timeout=wait_s):
            if key.data is self.child_exits:
                self.child_exits.drain()
                continue
            if self.preloader is not None and key.data is self.preloader:
                if not self.preloader.on_readable():
                    self.preloader_finished()
                continue
            proc: ProbeProcess = key.data
            if self.running.get(proc.name) is not proc:
                continue  # its pipes were closed earlier in this round (handed back to the queue)
            if not proc.on_readable(key.fd):
                self.selector.unregister(key.fd)
        now = time.monotonic()
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
    """By hand: every probe file beside this one, with default options."""
    names = sorted(f[:-3] for f in os.listdir(directory) if f.endswith(".py") and f[0] not in "_.")
    probes: Dict[str, str] = {}
    modules: Dict[str, str] = {}
    ships: Dict[str, List[str]] = {}
    for name in names:
        with open(os.path.join(directory, name + ".py")) as handle:
            probes[name] = handle.read()
        ships[name] = read_ships(probes[name])
        for file_name in ships[name]:
            with open(os.path.join(directory, file_name)) as handle:
                modules[file_name] = handle.read()
    return {"probes": probes, "modules": modules, "ships": ships, "options": {}, "deadline_s": 600}


if __name__ == "__main__":
    if "BUNDLE" not in globals():
        BUNDLE = bundle_from_directory(os.path.dirname(os.path.abspath(__file__)))
        clean_sys_path(os.path.dirname(os.path.abspath(__file__)))
    else:
        clean_sys_path()
    # Nothing is written on the host: no __pycache__ beside the modules the probes import, in
    # this process, its forked probes or any Python they start.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.exit(run_bundle(BUNDLE))
