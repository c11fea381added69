"""A local TCP server that REPLAYS CAPTURED NCCL RAS OUTPUT, for the live probe's tests.

It is not NCCL. The reports it sends are bytes captured from real NCCL RAS servers (the golden
files under tests/probes/golden/live/ras/; each folder's SOURCE.md says which job, host and NCCL
version gave them). A capture reads as NCCL's exchange was recorded: a line `> CMD` was sent by
the client, `< REPLY` came back, and what follows the last such line is the report the server
sent before it closed the connection.

Around the captured bytes it speaks the client protocol the way NCCL 2.28.9's
src/ras/client_support.cc does, for commands a capture does not hold: `CLIENT PROTOCOL n` is
answered `SERVER PROTOCOL 2`, `TIMEOUT n` is answered `OK`, an unknown command `ERROR: Unknown
command ...`, and the connection closes after the report. `SET FORMAT json` is answered `OK`
when the captured report is JSON and refused otherwise (NCCL before 2.28.7 had no SET FORMAT):
a text capture is served as an older NCCL would, so the client's fallback to text runs.

A capture may carry the text report of the same moment too (`text_report`): a connection that did
not ask for JSON gets it, as from NCCL 2.28.7 on, where JSON is asked for per connection.

Other behaviours, none of them NCCL output, stand in for what can go wrong:
    silent       accept the connection, never answer (what a SIGSTOPped NCCL process does: the
                 kernel completes the TCP handshake, nobody reads)
    close_early  close the connection after the first line the client sends
    garbage      answer the first line with an HTTP error (another program on the port)
    stall        replay the handshake, send half the report, then neither send nor close
"""

from __future__ import annotations

import contextlib
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BEHAVIOURS = ("replay", "silent", "close_early", "garbage", "stall")
RAS_CAPTURES = Path(__file__).parent / "golden" / "live" / "ras"


@dataclass
class Capture:
    """A recorded exchange: {command (upper case): reply line} and the report."""

    replies: dict[str, str] = field(default_factory=dict)
    report: str = ""
    # The text report of the same moment (another capture's report), served on a connection that
    # did not ask `SET FORMAT json`, as NCCL 2.28.7+ does; empty: `report` is served either way.
    text_report: str = ""

    @property
    def is_json(self) -> bool:
        return self.report.lstrip().startswith("{")


def with_pid(capture: Capture, old: int, new: int) -> Capture:
    """The capture with one process id replaced (a stand-in process serving it names itself);
    nothing else of the captured bytes changes."""
    report = re.sub(rf'("pid": ){old}\b', rf"\g<1>{new}", capture.report)
    report = re.sub(rf"(process ){old}\b", rf"\g<1>{new}", report)
    return Capture(dict(capture.replies), report, capture.text_report)


def readdressed(capture: Capture, old: str, new: str, occurrence: int | None = None) -> Capture:
    """The capture with a rank's host address changed (all of them, or only the Nth)."""
    needle = f'"host": "{old}"'
    parts = capture.report.split(needle)
    if occurrence is None:
        report = capture.report.replace(needle, f'"host": "{new}"')
    else:
        before = needle.join(parts[: occurrence + 1])
        report = before + f'"host": "{new}"' + needle.join(parts[occurrence + 1 :])
    return Capture(dict(capture.replies), report, capture.text_report)


def split_job_captures(on_a: str, on_b: str) -> tuple[Capture, Capture]:
    """One job over two hosts, as each host's RAS server tells it: NCCL 2.28.9's report whose
    missing rank lacks the comma after "nvml_dev", rank 0 moved to address `on_a` and the
    missing rank 1 to `on_b`; and host b's own 1-rank job (the real H200's), at `on_b`."""
    missing = load_capture(RAS_CAPTURES / "nccl2289_missing_rank_json" / "exchange.txt")
    missing = readdressed(missing, "192.0.2.2", on_a, occurrence=0)
    missing = readdressed(missing, "192.0.2.2", on_b)  # rank 1, missing
    own = load_capture(RAS_CAPTURES / "h200x1_1rank_json" / "exchange.txt")
    return missing, readdressed(own, "192.0.2.2", on_b)


def parse_capture(text: str) -> Capture:
    capture = Capture()
    lines = text.splitlines(keepends=True)
    command = None
    for index, line in enumerate(lines):
        if line.startswith("> "):
            command = line[2:].strip().upper()
        elif line.startswith("< ") and command is not None:
            capture.replies[command] = line[2:].rstrip("\r\n")
        else:
            capture.report = "".join(lines[index:])
            break
    return capture


def load_capture(path: Path) -> Capture:
    return parse_capture(path.read_text())


def reply_to(command: str, capture: Capture) -> str | None:
    """The line answering `command`; None for STATUS / VERBOSE STATUS (the report follows)."""
    key = command.strip().upper()
    if key in ("STATUS", "VERBOSE STATUS"):
        return None
    if key in capture.replies:
        return capture.replies[key]
    if key.startswith("CLIENT PROTOCOL "):
        return "SERVER PROTOCOL 2"
    if key.startswith("TIMEOUT "):
        return "OK"
    if key == "SET FORMAT JSON":
        return "OK" if capture.is_json else f"ERROR: Unknown command {command.strip()}"
    if key == "SET FORMAT TEXT":
        return "OK"
    return f"ERROR: Unknown command {command.strip()}"


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(0.2)
        buffer = b""
        self.asked_json = False
        while not self.server.stopping.is_set():
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                raw, _, buffer = buffer.partition(b"\n")
                if self.answer(sock, raw.decode("utf-8", "replace").rstrip("\r")):
                    return

    def answer(self, sock: socket.socket, command: str) -> bool:
        """Answer one command line as the captured server did; True: the connection ends."""
        self.server.received.append(command)
        behaviour, capture = self.server.behaviour, self.server.capture
        if behaviour == "silent":
            return False
        if behaviour == "close_early":
            return True
        if behaviour == "garbage":
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return True
        reply = reply_to(command, capture)
        if reply is not None:
            self.asked_json |= command.strip().upper() == "SET FORMAT JSON" and reply == "OK"
            sock.sendall((reply + "\n").encode())
            return False
        served = capture.text_report if capture.text_report and not self.asked_json else None
        report = (served or capture.report).encode()
        if behaviour == "stall":
            sock.sendall(report[: len(report) // 2])
            self.server.stopping.wait()
            return True
        sock.sendall(report)
        return True  # the server closes after the report, as NCCL does


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        if self.reuse_port:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()

    def __init__(self, behaviour: str, capture: Capture, port: int = 0) -> None:
        self.reuse_port = port != 0  # a fixed port is shared as NCCL shares it (SO_REUSEPORT)
        super().__init__(("127.0.0.1", port), _Handler)
        self.behaviour = behaviour
        self.capture = capture
        self.received: list[str] = []
        self.stopping = threading.Event()


@contextlib.contextmanager
def replay_server(
    capture: Capture | None = None, behaviour: str = "replay", port: int = 0
) -> Iterator[_Server]:
    """A running server on 127.0.0.1 (its port: `server.server_address[1]`), stopped on exit."""
    assert behaviour in BEHAVIOURS, behaviour
    server = _Server(behaviour, capture or Capture(), port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


if __name__ == "__main__":  # by hand: python3 -m tests.probes.ras_replay CAPTURE
    import sys

    with replay_server(load_capture(Path(sys.argv[1]))) as running:
        print(f"replaying {sys.argv[1]} on 127.0.0.1:{running.server_address[1]}")
        threading.Event().wait()


@contextlib.contextmanager
def split_job_hosts(
    on_a: str, on_b: str, folder: Path
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The live probe's options for hosts a and b of `split_job_captures`, each pointed at its own
    running replay and reading an empty folder under `folder` as /proc (so neither host sees
    this machine's processes, nor the other's)."""
    missing, own = split_job_captures(on_a, on_b)
    with replay_server(missing) as server_a, replay_server(own) as server_b:
        options = []
        for label, server in (("a", server_a), ("b", server_b)):
            proc = folder / f"proc-{label}"
            proc.mkdir()
            options.append(
                {
                    "proc": str(proc),
                    "ras_endpoints": [f"127.0.0.1:{server.server_address[1]}"],
                    "ras_read_timeout_s": 2,
                }
            )
        yield options[0], options[1]
