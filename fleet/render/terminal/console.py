"""The consoles the CLI prints through. Off a terminal (pipes, CI logs, files) every line is
written without trailing spaces: rich pads titles, table rows and wrapped lines to the width,
which shows up as trailing whitespace in logs and in text copied from them."""

from __future__ import annotations

import re
import sys
from typing import TextIO

from rich.console import Console

from fleet.errors import FleetError, wrap_words

TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")


class TrimmedLines:
    """A text stream that writes whole lines with trailing blanks removed (ANSI codes kept)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(TRAILING.sub(r"\1", line) + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def close_line(self) -> None:
        if self.pending:
            self.stream.write(TRAILING.sub(r"\1", self.pending))
            self.pending = ""

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


def make_console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr); off a terminal, without trailing spaces. Without
    rich's emoji codes: a host name, a path or an error that holds `:word:` is printed as it is
    (and rich's table of 4,000 emoji names is not loaded for it)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, emoji=False)
    return Console(file=TrimmedLines(stream), emoji=False)  # type: ignore[arg-type]


def error_text(error: FleetError) -> str:
    """An error as stderr shows it: wrapped to the terminal's width (80 off a terminal, or
    COLUMNS), words never broken."""
    return error.render(width=make_console(stderr=True).width)


def stderr_text(text: str, indent: int = 4) -> str:
    """A note or warning for stderr, wrapped as errors are (error_text), continuation lines
    indented by `indent`."""
    return wrap_words(text, make_console(stderr=True).width, indent=indent)
