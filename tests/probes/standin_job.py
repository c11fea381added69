"""A stand-in NCCL process for the live probe's tests: NOT an NCCL job.

It maps the library files named on its command line (`--dlopen` loads them with ctypes, as a
real job's dynamic linker would; the default maps them with mmap, which needs no loadable
library and puts the same path in /proc/PID/maps), names two of its threads as NCCL names its
own ("NCCL RAS", "NCCL Service  0"), prints "ready" and waits until its stdin closes (or 120 s).

    python3 -m tests.probes.standin_job [--dlopen] LIBRARY... [-- ARGS...]

Arguments after `--` are ignored: they are there to be seen (and masked) in its command line.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading

THREAD_NAMES = ("NCCL RAS", "NCCL Service  0")
PR_SET_NAME = 15


def name_this_thread(name: str) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode(), 0, 0, 0)


def named_thread(name: str, release: threading.Event, ready: threading.Event) -> None:
    name_this_thread(name)
    ready.set()
    release.wait(120)


def main(argv: list[str]) -> None:
    if "--" in argv:
        argv = argv[: argv.index("--")]
    dlopen = "--dlopen" in argv
    held = []
    for path in (a for a in argv if a != "--dlopen"):
        if dlopen:
            held.append(ctypes.CDLL(path))
        else:
            with open(path, "rb") as handle:
                held.append(mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ))
    release = threading.Event()
    for name in THREAD_NAMES:
        ready = threading.Event()
        threading.Thread(target=named_thread, args=(name, release, ready), daemon=True).start()
        ready.wait(10)
    print("ready", flush=True)
    waiter = threading.Thread(target=sys.stdin.read, daemon=True)
    waiter.start()
    waiter.join(120)
    release.set()


if __name__ == "__main__":
    main(sys.argv[1:])
