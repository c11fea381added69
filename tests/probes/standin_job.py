"""A stand-in NCCL process for the live probe's tests: NOT an NCCL job.

It maps the library files named on its command line (`--dlopen` loads them with ctypes, as a
real job's dynamic linker would; the default maps them with mmap, which needs no loadable
library and puts the same path in /proc/PID/maps), names two of its threads as NCCL names its
own ("NCCL RAS", "NCCL Service  0"), prints "ready" and waits until its stdin closes (or 120 s).

    python3 -m tests.probes.standin_job [--dlopen] [--listen PORT [--serve CAPTURE]] LIBRARY...
        [-- ARGS...]

--listen PORT: listen on 127.0.0.1:PORT with SO_REUSEPORT, as NCCL's RAS does, and never answer
(what a wedged RAS looks like from outside); with --serve CAPTURE, answer by replaying that
captured RAS exchange (tests/probes/ras_replay.py) with its first rank's pid replaced by this
process's. Arguments after `--` are ignored: they are there to be seen (and masked) in its
command line.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import socket
import sys
import threading
from pathlib import Path

THREAD_NAMES = ("NCCL RAS", "NCCL Service  0")
PR_SET_NAME = 15


def name_this_thread(name: str) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode(), 0, 0, 0)


def named_thread(name: str, release: threading.Event, ready: threading.Event) -> None:
    name_this_thread(name)
    ready.set()
    release.wait(120)


def option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    at = argv.index(name)
    value = argv[at + 1]
    del argv[at : at + 2]
    return value


def listen(port: int, capture: str | None, held: list[object]) -> None:
    if capture is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(16)
        held.append(sock)
        return
    from tests.probes.ras_replay import load_capture, replay_server, with_pid

    recorded = load_capture(Path(capture))
    first = re.search(r'"pid": (\d+)', recorded.report)
    if first:
        recorded = with_pid(recorded, int(first.group(1)), os.getpid())
    server = replay_server(recorded, port=port)
    held.append(server)
    server.__enter__()


def main(argv: list[str]) -> None:
    if "--" in argv:
        argv = argv[: argv.index("--")]
    argv = list(argv)
    port, capture = option(argv, "--listen"), option(argv, "--serve")
    dlopen = "--dlopen" in argv
    held: list[object] = []
    if port:
        listen(int(port), capture, held)
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
