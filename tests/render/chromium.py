"""A real headless Chromium driven over the DevTools protocol through a pipe (stdlib only).

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and write replies and
events to fd 4, each a JSON message ended by a NUL byte. A shell puts our stdin and stdout pipes
there. `open_page()` loads one file and records what a person's browser would complain about
(uncaught exceptions, console errors, log errors) and every request the page made.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",  # root in CI: Chromium's sandbox refuses to start as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)
# fd 3 ← our stdin (commands), fd 4 → our stdout (replies); Chromium's own stdout joins stderr.
LAUNCH = 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2'


class ProtocolError(Exception):
    pass


@dataclass
class Page:
    """What one page load produced."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    session: str = ""


class Browser:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str = "",
        timeout: float = 30,
    ) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\0")
        self.process.stdin.flush()
        while True:
            reply = self.receive(timeout)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no message from Chromium in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ProtocolError("Chromium closed the pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def wait_for(self, method: str, session: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(
            e.get("method") == method and e.get("sessionId") == session for e in self.events
        ):
            self.events.append(self.receive(max(0.1, deadline - time.monotonic())))

    def open_page(self, path: Path, settle_s: float = 0.5) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", session)
        self.evaluate(session, f"new Promise(r => setTimeout(r, {int(settle_s * 1000)}))")
        return self.page(session)

    def page(self, session: str) -> Page:
        page = Page(session=session)
        for event in (e for e in self.events if e.get("sessionId") == session):
            params = event.get("params", {})
            method = event.get("method")
            if method == "Runtime.exceptionThrown":
                page.errors.append(json.dumps(params.get("exceptionDetails"))[:2000])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                page.errors.append(json.dumps(params.get("args"))[:2000])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                page.errors.append(json.dumps(params["entry"])[:2000])
            elif method == "Network.requestWillBeSent":
                page.requests.append(params.get("request", {}).get("url", ""))
        return page

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited); raises on a throw."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.send("Runtime.evaluate", params, session=session)
        if "exceptionDetails" in result:
            raise ProtocolError(json.dumps(result["exceptionDetails"])[:2000])
        return result.get("result", {}).get("value")


@contextmanager
def chromium() -> Iterator[Browser]:
    """A fresh headless Chromium with its own profile; stopped (its whole process group) after."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="fleet-chromium-") as profile:
        process = subprocess.Popen(
            ["sh", "-c", LAUNCH, CHROMIUM, *FLAGS, f"--user-data-dir={profile}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own group: the zygote and renderers go with it
        )
        browser = Browser(process)
        try:
            yield browser
        finally:
            _stop(browser)


def _stop(browser: Browser) -> None:
    """Browser.close first (Chromium then ends its own children), the process group if it hangs."""
    process = browser.process
    with suppress(ProtocolError, TimeoutError, OSError):  # gone already, or closing: wait decides
        browser.send("Browser.close", timeout=5)
    try:
        process.wait(timeout=10)
        os.killpg(process.pid, signal.SIGKILL)  # anything of its group still around
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
