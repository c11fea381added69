"""The words of OpenSSH's client configuration language, split as OpenSSH 9 splits them
(readconf.c, misc.c): a config line, a `-o` option and a Match line. Pure.

- a line is `Keyword value…` or `Keyword=value…` (split_line); a blank line or one whose keyword
  starts with `#` is a comment;
- values are split as OpenSSH's argv_split does (double or single quotes, backslash escapes), and a
  word starting with `#` ends the line: an end-of-line comment (`HostName 10.0.0.5  # rack 3`) is
  no error;
- a Match line is split as OpenSSH's strdelim does, word by word (`=` separates too).

A line ssh rejects is a `ConfigSyntaxError` naming its place (`file:line`), as ssh fails on one
whatever host is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

WHITESPACE = " \t\r\n"


class ConfigSyntaxError(Exception):
    """A line OpenSSH rejects: ssh fails on it whatever host is asked for."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"{place}: {reason}")
        self.place, self.reason = place, reason


def argv_split(text: str, terminate_on_comment: bool = True) -> list[str]:
    """OpenSSH's argv_split (misc.c): words separated by spaces or tabs; "…" and '…' quote; a
    backslash escapes a quote, a backslash, or (unquoted) a space; a word starting with # ends it."""
    words: list[str] = []
    index, size = 0, len(text)
    while index < size:
        if text[index] in " \t":
            index += 1
            continue
        if terminate_on_comment and text[index] == "#":
            break
        word: list[str] = []
        quote = ""
        while index < size:
            char = text[index]
            following = text[index + 1] if index + 1 < size else ""
            escaped = following != "" and (following in "'\"\\" or (not quote and following == " "))
            if char == "\\" and escaped:
                word.append(following)
                index += 1
            elif not quote and char in " \t":
                break
            elif not quote and char in "\"'":
                quote = char
            elif quote and char == quote:
                quote = ""
            else:
                word.append(char)
            index += 1
        if quote:
            raise ValueError("invalid quotes")
        words.append("".join(word))
    return words


def strdelim_words(text: str) -> Iterator[str]:
    """OpenSSH's strdelim, called until it runs out (Match lines): a word ends at whitespace or one
    `=`; a double quote starts a word that runs to the next one."""
    rest: str | None = text
    while rest:
        cut = next((i for i, c in enumerate(rest) if c in WHITESPACE + '"='), None)
        if cut is None:
            yield rest
            return
        if rest[cut] == '"':
            closing = rest.find('"', cut + 1)
            if closing < 0:
                raise ValueError("no matching quote")
            yield rest[:cut] + rest[cut + 1 : closing]
            rest = rest[closing + 1 :].lstrip(WHITESPACE)
            continue
        word, equals = rest[:cut], rest[cut] == "="
        rest = rest[cut + 1 :].lstrip(WHITESPACE)
        if not equals and rest.startswith("="):
            rest = rest[1:].lstrip(WHITESPACE)
        yield word


LINE_RE = re.compile(r"^[ \t\r\n]*([^ \t\r\n=]*)[ \t\r\n]*(?:=[ \t\r\n]*)?(.*)$", re.DOTALL)


def split_line(line: str) -> tuple[str, str] | None:
    """(lower-case keyword, the rest as written) of a config line; None for a blank or comment."""
    match = LINE_RE.match(line.rstrip(WHITESPACE + "\f"))
    if not match or not match[1] or match[1].startswith("#"):
        return None
    return match[1].lower(), match[2]
