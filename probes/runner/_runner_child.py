"""The host runner's forked child: what runs in the process of one probe, and nothing else.

A runner module (probes/runner/_host_runner.py, RUNNER_MODULES): it travels in every bundle and the
runner makes it importable by name before it imports it. The child runs its probe's source with
the probe's shipped helpers at hand, and writes the probe's result, or what it raised, as JSON on
its result pipe; its stdout and stderr are the runner's output pipe. Stdlib only, Python 3.8+
(and it still loads on 3.6/3.7, so that the runner can say it needs 3.8).
"""

import json
import linecache
import os
import re
import signal
import traceback
from typing import Any, Dict, NoReturn

Options = Dict[str, Any]  # one probe's options, handed to its collect()
TRACEBACK_CHARS = 4096  # the tail of a raising probe's traceback that is sent: its last frames

# probe name -> {file name: text}: the SHIPS files of the bundle, handed to each probe in memory
SHIPPED: Dict[str, Dict[str, str]] = {}

# probe name -> its file as the controller names it (myprobes/x.py): its code's file name
PATHS: Dict[str, str] = {}


def probe_file(name: str) -> str:
    return PATHS.get(name) or "probes/%s.py" % name


def read_inits_cuda(source: str) -> bool:
    return re.search(r"^INITS_CUDA\s*=\s*True\b", source, re.MULTILINE) is not None


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


def forget_child_exits() -> None:
    """In a forked child: the runner's wake-up is not ours (a byte from us would wake it)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
