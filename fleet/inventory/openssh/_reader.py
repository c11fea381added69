"""~/.ssh/config read as OpenSSH 9 reads it (readconf.c, ssh.c), for the keywords that say where
and how fleet connects: for one host name at a time, what the files set. No asyncssh: its parser
differs from OpenSSH's (end-of-line comments, commas in Host lines, ProxyJump against
ProxyCommand, Hostname's case).

The parts, each as OpenSSH does it:
- the words of a line: _lexer.py;
- what a keyword's value means, and what the lines that applied set (the first value wins):
  _options.py;
- which lines apply, Host and Match: _match.py;
- here, the files and the passes: each file (as `ssh -F FILE` would read it) line by line, the
  first value obtained winning; Include reads each file a glob names (relative to ~/.ssh), its
  Host blocks scoped to it, at most 16 deep; Hostname's %h is expanded and the name lower-cased
  as ssh.c does, and a `Match final` (or CanonicalizeHostname) asks for a second, final pass that
  matches Host lines against the real hostname.

A block that a line fleet cannot evaluate decides (newer criteria, `Match exec` when fleet runs no
command) refuses the host
when it would set a keyword fleet reads or include a file (`refusals`). A syntax error, even in a
block that does not apply, is a `ConfigSyntaxError` naming file and line, as ssh fails on one.

These modules know nothing of fleet's hosts and import nothing else of fleet:
_apply.py applies their result, and fleet/inventory/ansible.py reads Ansible's
ssh command lines with _argv.py.
"""

from __future__ import annotations

import getpass
import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet.inventory.openssh._lexer import ConfigSyntaxError, argv_split, split_line
from fleet.inventory.openssh._match import ConfigPass, host_matches, match_line
from fleet.inventory.openssh._options import (
    ALIASES,
    CANONICAL,
    SshConfigValues,
    apply_keyword,
    is_address,
    percent_expand,
)

MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class _Line:
    """A config line fleet acts on, split once: or the error ssh would stop at."""

    place: str
    keyword: str = ""
    rest: str = ""
    words: list[str] = field(default_factory=list)
    error: ConfigSyntaxError | None = None


def _split(text: str, place: str) -> _Line | None:
    split = split_line(text)
    if split is None:
        return None
    keyword, rest = split
    keyword = ALIASES.get(keyword, keyword)
    if not rest:
        return _Line(
            place, error=ConfigSyntaxError(place, f'no argument after keyword "{keyword}"')
        )
    if keyword == "match":
        return _Line(place, keyword, rest)
    try:
        words = argv_split(rest)
    except ValueError as exc:
        return _Line(place, error=ConfigSyntaxError(place, str(exc)))
    if keyword not in ("host", "include", *CANONICAL):
        return None  # a keyword fleet does not read: skipped, its value unchecked
    if keyword in CANONICAL:
        try:  # checked here once, as ssh checks a value whether or not its block applies
            apply_keyword(SshConfigValues(), keyword, rest, words, place, True)
        except ConfigSyntaxError as exc:
            return _Line(place, error=exc)
    return _Line(place, keyword, rest, words)


class ConfigReader:
    """Reads ssh_config files (each as `ssh -F FILE` would) for one host name at a time; each file
    is read from disk and split into lines once."""

    def __init__(
        self,
        paths: Sequence[Path],
        local_user: str | None = None,
        run_exec: Callable[[str, str], bool | str | None] | None = None,
    ) -> None:
        self.paths = tuple(paths)
        self.local_user = local_user or getpass.getuser()
        self.run_exec = run_exec  # Match exec (_exec.py); None: no command is run
        self._lines: dict[str, list[_Line]] = {}

    def resolve(self, name: str, given: Sequence[tuple[str, object]] = ()) -> SshConfigValues:
        """What the files say for `ssh name`: a first pass, and the final pass a `Match final` (or
        CanonicalizeHostname) asks for, matching Host lines against the real hostname. `given`:
        User and Port as on ssh's command line (-l, -p): they win, and Match user and exec's %r,
        %p see them."""
        options = SshConfigValues()
        for keyword, value in given:
            options.set_first(keyword, value, "the command line")
        first = ConfigPass(name, name, False, self.local_user, run_exec=self.run_exec)
        self._read_all(options, first)
        hostname = expand_hostname(options, name)
        if hostname is not None:
            options.values["Hostname"] = hostname if is_address(hostname) else hostname.lower()
        if first.want_final or options.get("CanonicalizeHostname", False):
            configured = "Hostname" in options.values
            host = str(options.values.get("Hostname") or name)
            options.values["Hostname"] = host if is_address(host) else host.lower()
            host = str(options.values["Hostname"])
            final = ConfigPass(host, name, True, self.local_user, run_exec=self.run_exec)
            self._read_all(options, final)
            if not configured:
                del options.values["Hostname"]
        options.refusals = list(dict.fromkeys(options.refusals))
        return options

    def _read_all(self, options: SshConfigValues, state: ConfigPass) -> None:
        for path in self.paths:
            self._read(str(path), options, state, True, never=False, depth=0, top=True)

    # --------------------------------------------------------------------------------- files

    def _file_lines(self, path: str, top: bool) -> list[_Line] | None:
        """The lines of `path` that matter to fleet, split and checked once per file."""
        if path not in self._lines:
            try:
                with open(path, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
            except (FileNotFoundError, IsADirectoryError):
                if top:
                    raise
                return None
            if len(data) > MAX_FILE_BYTES:
                raise ConfigSyntaxError(f"{path}:1", "larger than 4 MB: is it an ssh_config?")
            text = data.decode("utf-8", errors="replace")
            lines = [_split(line, f"{path}:{n}") for n, line in enumerate(text.splitlines(), 1)]
            self._lines[path] = [line for line in lines if line is not None]
        return self._lines[path]

    def _read(
        self,
        path: str,
        options: SshConfigValues,
        state: ConfigPass,
        active: bool | str,
        never: bool,
        depth: int,
        top: bool = False,
    ) -> None:
        if depth > MAX_DEPTH:
            raise ConfigSyntaxError(path, "too many recursive configuration includes")
        for line in self._file_lines(path, top) or ():
            active = self._line(line, options, state, active, never, depth)

    def _line(
        self,
        line: _Line,
        options: SshConfigValues,
        state: ConfigPass,
        active: bool | str,
        never: bool,
        depth: int,
    ) -> bool | str:
        if line.error:
            raise line.error
        keyword, place = line.keyword, line.place
        if keyword == "match":
            decided = match_line(line.rest, place, options, state)
            return False if never else decided
        if keyword == "host":
            return host_matches(line.words, place, state) and not never
        if isinstance(active, str):
            what = f"includes {line.rest}" if keyword == "include" else f"sets {CANONICAL[keyword]}"
            options.refusals.append(f"{active}; that block {what} at {place}")
        if active is not True:
            return active  # its values were checked when the file was read
        if keyword == "include":
            self._include(line.words, place, options, state, True, depth)
        else:
            apply_keyword(options, keyword, line.rest, line.words, place, True)
        return active

    def _include(
        self,
        words: list[str],
        place: str,
        options: SshConfigValues,
        state: ConfigPass,
        active: bool,
        depth: int,
    ) -> None:
        for word in words:
            if not word:
                raise ConfigSyntaxError(place, "keyword include empty argument")
            pattern = word if word.startswith(("/", "~")) else f"~/.ssh/{word}"
            for found in sorted(glob.glob(os.path.expanduser(pattern))):
                if os.path.isfile(found):
                    self._read(found, options, state, active, not active, depth + 1)


def expand_hostname(options: SshConfigValues, name: str) -> str | None:
    """Hostname with %h (the name as given) and %% expanded, as ssh.c does; a refusal for another
    token (ssh exits on one)."""
    hostname = options.get("Hostname")
    if hostname is None:
        return None
    expanded = percent_expand(str(hostname), {"h": name})
    if expanded is None:
        options.refusals.append(
            f"{options.places['Hostname']}: Hostname {hostname} uses a %-token other than %h: "
            "ssh refuses it"
        )
        return str(hostname)
    return expanded
