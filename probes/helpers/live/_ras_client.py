"""The NCCL RAS client: the line protocol of NCCL's src/ras/client.cc and client_support.cc
over TCP, one exchange per connection, every read bounded; asks one endpoint until every local
listener has answered.

Not a probe (the leading underscore): probes/live.py imports it and lists it in its `SHIPS`.
Stdlib only, Python 3.8.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from _ras_reports import excerpt, is_nccl_text, parse_json_report, parse_text_report, pids_in

# NCCL RAS (src/ras/client.cc, client_support.cc in NVIDIA/nccl): a line protocol on TCP, then
# the report, then the server closes the connection. JSON from NCCL 2.28.7 on, text before.
RAS_DEFAULT = "localhost:28028"
RAS_PROTOCOL = 2
RAS_CONNECT_TIMEOUT_S = 1.0
RAS_READ_TIMEOUT_S = 3.0  # each handshake reply; a stopped process costs this much
RAS_COLLECTIVE_TIMEOUT_S = 2  # sent as `TIMEOUT n`: how long RAS waits for the other processes
RAS_EXTRA_TIMEOUT_S = 5.0  # NCCL's RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC on top of that
RAS_ATTEMPTS = 6  # connections per endpoint at most (SO_REUSEPORT spreads them over listeners)
RAS_BUDGET_S = 20.0  # every endpoint together
RAS_REPORT_MAX_BYTES = 16 * 1024 * 1024
RAS_LINE_MAX_BYTES = 64 * 1024
PARSE_JSON = "parse JSON"  # the stage of an exchange whose whole JSON report did not parse


def parse_endpoint(text: str) -> Tuple[str, int]:
    """NCCL_RAS_ADDR as NCCL reads it: host:port, [v6]:port, or a host alone (port 28028)."""
    text = text.strip()
    default_port = int(RAS_DEFAULT.rsplit(":", 1)[1])
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:  # a bare host, or a bare IPv6 address
        host, port = text, ""
    if port and not port.isdigit():
        raise ValueError("not a port: %r" % port)
    return host or "localhost", int(port) if port else default_port


# ---------------------------------------------------------------- touching the host: NCCL RAS


class RasTimeout(Exception):
    """The server did not answer in time."""


class RasConnection:
    """One TCP connection to a RAS server: lines out, lines or the whole report back, each read
    bounded by a deadline. `transcript`, when a list, receives (direction, text) pairs."""

    def __init__(self, sock: socket.socket, transcript: Optional[List[Tuple[str, str]]]) -> None:
        self.sock = sock
        self.buffer = b""
        self.transcript = transcript
        self.received = 0

    def send_line(self, line: str) -> None:
        self.sock.sendall((line + "\n").encode("ascii"))
        self._note(">", line)

    def read_line(self, deadline: float) -> Optional[bytes]:
        """The next line without its newline; None when the server closed the connection first."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > RAS_LINE_MAX_BYTES:
                raise ValueError(
                    "no line end in %d bytes: %s" % (len(self.buffer), excerpt(self.buffer))
                )
            chunk = self._recv(deadline)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        line = line.rstrip(b"\r")
        self._note("<", line.decode("utf-8", "replace"))
        return line

    def read_to_end(self, deadline: float) -> Tuple[bytes, Optional[str]]:
        """Everything until the server closes: (data, None), or (what came, why it stopped)."""
        data, self.buffer = self.buffer, b""
        why = None
        try:
            while True:
                chunk = self._recv(deadline)
                if not chunk:
                    break
                data += chunk
                if len(data) > RAS_REPORT_MAX_BYTES:
                    why = "report longer than %d bytes: cut" % RAS_REPORT_MAX_BYTES
                    break
        except RasTimeout:
            why = "timeout"
        self._note("body", data.decode("utf-8", "replace"))
        return data, why

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RasTimeout()
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout as exc:
            raise RasTimeout() from exc
        self.received += len(chunk)
        return chunk

    def _note(self, direction: str, text: str) -> None:
        if self.transcript is not None:
            self.transcript.append((direction, text))


def render_transcript(transcript: List[Tuple[str, str]]) -> str:
    """A transcript as the golden files write it: `> sent`, `< received line`, then the report."""
    out = []
    for direction, text in transcript:
        out.append(text if direction == "body" else "%s %s\n" % (direction, text))
    return "".join(out)


def ras_query(
    family: int,
    address: Tuple[Any, ...],
    settings: Dict[str, float],
    transcript: Optional[List[Tuple[str, str]]] = None,
) -> Dict[str, Any]:
    """One exchange with a RAS server: handshake, TIMEOUT, SET FORMAT json (text when refused),
    VERBOSE STATUS, the report until the server closes. Never raises for what the server does."""
    started = time.monotonic()
    result: Dict[str, Any] = {
        "address": _address_text(family, address),
        "stage": "connect",
        "answered": False,
        "listening": None,
        "server_protocol": None,
        "format": None,
        "error": None,
        "report": None,
        "bytes": 0,
    }
    sock = socket.socket(family, socket.SOCK_STREAM)
    connection = RasConnection(sock, transcript)
    try:
        if _connect(sock, address, settings, result):
            _exchange(connection, settings, result)
    except RasTimeout:
        result["error"] = (
            "connected, but no answer to %s within %g s (the process may be stopped or wedged)"
            % (result["stage"], settings["read_timeout_s"])
        )
    except ValueError as exc:  # what the server said or did, in our words
        result["error"] = str(exc)
    except OSError as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        sock.close()
        result["bytes"] = connection.received
        result["elapsed_s"] = round(time.monotonic() - started, 3)
    return result


def _connect(
    sock: socket.socket,
    address: Tuple[Any, ...],
    settings: Dict[str, float],
    result: Dict[str, Any],
) -> bool:
    """Whether the TCP connection was made; when not, `result` says why."""
    sock.settimeout(settings["connect_timeout_s"])
    try:
        sock.connect(address)
    except ConnectionRefusedError:
        result.update(listening=False, error="connection refused: nothing listens there")
        return False
    except socket.timeout:
        result["error"] = "no TCP answer within %g s" % settings["connect_timeout_s"]
        return False
    result["listening"] = True
    return True


def _exchange(
    connection: RasConnection, settings: Dict[str, float], result: Dict[str, Any]
) -> None:
    result["stage"] = "CLIENT PROTOCOL"
    reply = _ask(connection, "CLIENT PROTOCOL %d" % RAS_PROTOCOL, settings)
    if not reply.upper().startswith(b"SERVER PROTOCOL "):
        raise ValueError("not an NCCL RAS server: it answered %s" % excerpt(reply))
    result["server_protocol"] = reply.split()[-1].decode("ascii", "replace")
    result["stage"] = "TIMEOUT"
    timeout_s = max(1, int(settings["collective_timeout_s"]))  # 0 would mean "wait forever"
    _ask(connection, "TIMEOUT %d" % timeout_s, settings)  # an ERROR keeps NCCL's default (5 s)
    use_json = False
    if settings.get("json", 1):
        result["stage"] = "SET FORMAT json"
        use_json = _ask(connection, "SET FORMAT json", settings).strip().upper() == b"OK"
    result["format"] = "json" if use_json else "text"
    result["stage"] = "VERBOSE STATUS"
    connection.send_line("VERBOSE STATUS")
    deadline = time.monotonic() + timeout_s + RAS_EXTRA_TIMEOUT_S + settings["read_timeout_s"]
    data, cut = connection.read_to_end(deadline)
    text = data.decode("utf-8", "replace")
    if use_json:
        if cut:
            raise ValueError("%s before the JSON report ended (%d bytes came)" % (cut, len(data)))
        result["stage"] = PARSE_JSON  # a whole report that does not parse: asked again in text
        result["report"] = parse_json_report(text)
    else:
        result["report"] = parse_text_report(text)
        if not is_nccl_text(result["report"]):
            result["report"] = None
            raise ValueError("not NCCL's text report: %s" % excerpt(data))
        if cut or not result["report"]["complete"]:
            result["error"] = "%s: the text report stopped short (%d bytes came)" % (
                cut or "closed",
                len(data),
            )
    result["answered"] = True
    result["stage"] = "done"


def _ask(connection: RasConnection, command: str, settings: Dict[str, float]) -> bytes:
    connection.send_line(command)
    reply = connection.read_line(time.monotonic() + settings["read_timeout_s"])
    if reply is None:
        raise ValueError("the server closed the connection after %s" % command)
    return reply


def _address_text(family: int, address: Tuple[Any, ...]) -> str:
    host, port = address[0], address[1]
    return "[%s]:%d" % (host, port) if family == socket.AF_INET6 else "%s:%d" % (host, port)


def resolve(host: str, port: int, timeout_s: float = 1.0) -> List[Tuple[int, Tuple[Any, ...]]]:
    """(family, address) to try, in order: localhost is 127.0.0.1 then ::1 (NCCL may bind
    either); an IP is itself; a name is resolved in a thread that is given up after timeout_s."""
    if host == "localhost":
        return [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return [(family, (host, port) if family == socket.AF_INET else (host, port, 0, 0))]
    found: List[Any] = []

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except OSError:
            pass

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return [
        (info[0], info[4]) for info in list(found) if info[0] in (socket.AF_INET, socket.AF_INET6)
    ]


def query_endpoint(
    endpoint: str,
    listeners: List[Dict[str, Any]],
    settings: Dict[str, float],
    deadline: float,
    transcripts: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """Ask one endpoint until every local listener's pid is in an answer, within the attempts.

    NCCL binds its RAS port with SO_REUSEPORT: every NCCL process of a user on a host listens on
    the same port and the kernel hands each connection to one of them. A stopped one never
    answers and another job's answers name other communicators: each further connection may
    reach another listener, so up to one attempt per listener (plus one) is made."""
    outcome: Dict[str, Any] = {
        "endpoint": endpoint,
        "attempts": [],
        "answered": False,
        "error": None,
    }
    addresses = _addresses_of(endpoint, outcome)
    # A stopped listener cannot answer: it is not waited for (problems names it).
    wanted = {
        p.get("ns_pid") or p["pid"] for p in listeners if p.get("state") not in ("T", "t", "Z")
    }
    limit = 1 if len(listeners) <= 1 else min(int(settings["attempts"]), 2 * len(listeners) + 1)
    seen: set = set()
    connections = 0
    while addresses and connections < limit and time.monotonic() < deadline:
        connections += 1
        attempt = _connection(addresses, settings, outcome, transcripts)
        if attempt is None or attempt["listening"] is False:
            break  # nothing listens on any address: another try changes nothing
        if attempt["answered"]:
            outcome["answered"] = True
            seen |= pids_in(attempt["report"])
        if wanted <= seen and (outcome["answered"] or not wanted):
            break  # every live listener answered, or none is known to wait for
    errors = outcome.get("unreadable") or [a["error"] for a in outcome["attempts"] if a["error"]]
    if not outcome["answered"] and errors:
        outcome["error"] = errors[-1]
    return outcome


def _addresses_of(endpoint: str, outcome: Dict[str, Any]) -> List[Tuple[int, Tuple[Any, ...]]]:
    """The addresses to try for `endpoint`; none, and outcome["error"] says why, when it is no
    endpoint or its host does not resolve."""
    try:
        host, port = parse_endpoint(endpoint)
    except ValueError as exc:
        outcome["error"] = "not an endpoint: %s" % exc
        return []
    addresses = resolve(host, port)
    if not addresses:
        outcome["error"] = "could not resolve %s" % host
    return addresses


def _connection(
    addresses: List[Tuple[int, Tuple[Any, ...]]],
    settings: Dict[str, float],
    outcome: Dict[str, Any],
    transcripts: Optional[List[str]],
) -> Optional[Dict[str, Any]]:
    """One exchange, on the first address something listens on; each attempt is recorded. A JSON
    report that came whole but does not parse (after repair_missing_rank_commas) is asked for
    again in text, on a new connection; when neither reads, outcome["unreadable"] says why."""
    attempt = None
    for family, address in addresses:
        attempt = _recorded_query(family, address, settings, outcome, transcripts)
        if attempt["stage"] == PARSE_JSON and not attempt["answered"]:
            first = attempt
            attempt = _recorded_query(
                family, address, dict(settings, json=0.0), outcome, transcripts
            )
            attempt["retry"] = "text, the JSON report did not parse"
            if not attempt["answered"]:
                where = (
                    "" if first["address"] == outcome["endpoint"] else " from " + first["address"]
                )
                outcome.setdefault("unreadable", []).append(
                    "no readable report%s (JSON: %s; text: %s)"
                    % (where, first["error"], attempt["error"])
                )
        if attempt["listening"] is not False:
            break
    return attempt


def _recorded_query(
    family: int,
    address: Tuple[Any, ...],
    settings: Dict[str, float],
    outcome: Dict[str, Any],
    transcripts: Optional[List[str]],
) -> Dict[str, Any]:
    transcript: Optional[List[Tuple[str, str]]] = [] if transcripts is not None else None
    attempt = ras_query(family, address, settings, transcript)
    outcome["attempts"].append(attempt)
    if transcripts is not None and transcript:
        transcripts.append(render_transcript(transcript))
    return attempt
