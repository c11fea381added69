"""ssh's command line read as ssh (OpenSSH 9.2) reads it: getopt over its options, then each `-o`
read as a config line is (readconf.c's process_config_line). Pure. fleet/inventory/ansible.py
reads Ansible's ssh_args and friends with it (`OpenSsh.command_line`).

The first value wins, as on ssh's command line. Honoured: -i, -J, -l, -o, -p (and through -o the
keywords fleet reads of a config file: _options.py). Harmless to leave
out: output, forwarding, multiplexing and cipher options. Refused, naming where it was written:
what changes where or how ssh connects and fleet cannot do (`REFUSED_FLAGS`), an option ssh does
not know, and a word that is no option (ssh would take it as the host or the command).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleet.inventory.openssh._apply import FIELDS, connection_refusals
from fleet.inventory.openssh._lexer import ConfigSyntaxError, argv_split, split_line
from fleet.inventory.openssh._options import (
    ALIASES,
    CANONICAL,
    KNOWN_KEYWORDS,
    ProxyState,
    SshConfigValues,
    a2port,
    apply_keyword,
    jump_text,
    parse_jump,
    percent_expand,
)
from fleet.inventory.openssh._proxy_command import ProxyCommandError, command_words

# ssh(1)'s options (OpenSSH 9.2 getopt string): those taking a value, and those that do not.
WITH_VALUE = frozenset("bcDeEFiIJlLmoOpQRSwWB")
WITHOUT_VALUE = frozenset("1246afgknqstvxACGKMNPTVXYy")
# What fleet does with each: honoured; harmless to leave out (output, forwarding, multiplexing,
# ciphers); or refused because it changes where or how ssh connects and fleet cannot do it.
HONOURED_FLAGS = frozenset("iJlop")
REFUSED_FLAGS = {
    "F": "reads another ssh_config file",
    "b": "binds a source address",
    "B": "binds a source interface",
    "W": "forwards stdio instead of running a command",
    "G": "prints the configuration instead of connecting",
    "Q": "queries ssh instead of connecting",
    "V": "prints ssh's version instead of connecting",
    "O": "controls a master connection instead of connecting",
    "N": "runs no command",
    "s": "requests a subsystem instead of a command",
    "f": "goes to the background",
    "P": "is not an option of OpenSSH 9.2",
}


def parse_ssh_argv(segments: Sequence[tuple[Sequence[str], str]], host: str) -> SshConfigValues:
    """ssh's command-line options (getopt, then process_config_line for each -o) from `segments`
    of words, each with the place it was written (for messages). The first value wins, as ssh's
    command line does; what fleet cannot honour is a refusal naming its place."""
    options = SshConfigValues()
    state = ProxyState()
    words = [(word, place) for chunk, place in segments for word in chunk]
    index = 0
    while index < len(words):
        word, place = words[index]
        index += 1
        if word == "--" or not word.startswith("-") or word == "-":
            options.refusals.append(
                f"{place}: {word!r} is not an ssh option (ssh would take it as the host or command)"
            )
            continue
        index = _word(options, state, words, index, host)
    options.proxy_events = _proxy_events(state)
    return options


def _word(
    options: SshConfigValues, state: ProxyState, words: list[tuple[str, str]], index: int, host: str
) -> int:
    """The flags of the word before `index` (getopt: `-vp22`); the index of the next word."""
    word, place = words[index - 1]
    position = 1
    while position < len(word):
        flag = word[position]
        position += 1
        if flag in WITH_VALUE:
            value = word[position:]
            if not value:
                if index >= len(words):
                    options.refusals.append(f"{place}: ssh option -{flag} has no value")
                    return index
                value = words[index][0]
                index += 1
            _flag(options, state, flag, value, place, host)
            return index
        if flag not in WITHOUT_VALUE:
            options.refusals.append(f"{place}: -{flag} is not an ssh option")
        elif flag in REFUSED_FLAGS:
            options.refusals.append(f"{place}: ssh -{flag} {REFUSED_FLAGS[flag]}")
    return index


def _proxy_events(state: ProxyState) -> list[tuple[str, str, str]]:
    events = []
    if state.jump is not None:
        events.append(("ProxyJump", state.jump, state.jump_place))
    if state.command is not None and not (
        state.command == "none" and state.jump not in (None, "none")
    ):
        events.append(("ProxyCommand", state.command, state.command_place))
    return events


def _flag(
    options: SshConfigValues, state: ProxyState, flag: str, value: str, place: str, host: str
) -> None:
    if flag in REFUSED_FLAGS:
        options.refusals.append(f"{place}: ssh -{flag} {value} {REFUSED_FLAGS[flag]}")
    elif flag == "o":
        _dash_o(options, state, value, place)
    elif flag == "i":
        if value not in [p for p, _ in options.identity_files]:
            options.identity_files.append((value, place))
    elif flag == "l":
        options.set_first("User", value, place)
    elif flag == "p":
        port = a2port(value)
        if port == -1:
            options.refusals.append(f"{place}: ssh -p {value}: bad port")
        else:
            options.set_first("Port", port, place)
    elif flag == "J":
        _dash_j(options, state, value, place)


def _dash_j(options: SshConfigValues, state: ProxyState, value: str, place: str) -> None:
    if state.jump is not None:
        options.refusals.append(f"{place}: ssh -J {value}: only a single -J option is permitted")
        return
    if state.command is not None:
        options.refusals.append(f"{place}: ssh -J {value}: cannot be combined with ProxyCommand")
        return
    try:
        text = (
            value if value.lower() == "none" else ",".join(jump_text(*h) for h in parse_jump(value))
        )
    except ValueError:
        options.refusals.append(f"{place}: ssh -J {value}: invalid jump host")
        return
    state.jump, state.jump_place = text, place
    state.command, state.command_place = "none", place


def _dash_o(options: SshConfigValues, state: ProxyState, text: str, place: str) -> None:
    """`-o Keyword=value` (or `-o "Keyword value"`), read like a config line."""
    keyword_rest = _dash_o_keyword(options, text, place)
    if keyword_rest is None:
        return
    keyword, rest = keyword_rest
    try:
        words = argv_split(rest)
        if not rest:
            raise ConfigSyntaxError(place, f'no argument after keyword "{keyword}"')
        scratch = SshConfigValues()
        apply_keyword(scratch, keyword, rest, words, place, True)
    except (ValueError, ConfigSyntaxError) as exc:
        reason = exc.reason if isinstance(exc, ConfigSyntaxError) else str(exc)
        options.refusals.append(f"{place}: -o {text}: {reason}")
        return
    _merge(options, state, scratch)


def _dash_o_keyword(options: SshConfigValues, text: str, place: str) -> tuple[str, str] | None:
    """The keyword (lower-case) and the rest of a `-o` fleet reads; None (and a refusal where
    ssh would fail) otherwise."""
    split = split_line(text)
    if split is None:
        options.refusals.append(f"{place}: -o {text!r} sets nothing")
        return None
    keyword, rest = split
    keyword = ALIASES.get(keyword, keyword)
    if keyword in ("host", "match", "include"):
        options.refusals.append(f"{place}: -o {text}: {keyword} is not allowed on the command line")
        return None
    if keyword not in KNOWN_KEYWORDS:
        options.refusals.append(f"{place}: -o {text}: ssh does not know {keyword!r}")
        return None
    if keyword not in CANONICAL:
        return None  # known to ssh, and it does not change where fleet connects or whom it trusts
    return keyword, rest


def _merge(options: SshConfigValues, state: ProxyState, scratch: SshConfigValues) -> None:
    """One `-o`'s values over the command line's so far (the first value wins)."""
    for name, proxy, where in scratch.proxy_events:
        if name == "ProxyJump":
            state.proxy_jump(proxy, where)
        else:
            state.proxy_command(proxy, where)
    for name, value in scratch.values.items():
        if name not in ("ProxyJump", "ProxyCommand"):
            options.set_first(name, value, scratch.places[name])
    for path, where in scratch.identity_files:
        if path not in [p for p, _ in options.identity_files]:
            options.identity_files.append((path, where))
    options.applied += scratch.applied


# ------------------------------------------------------------------------- fleet's settings


@dataclass
class CommandLine:
    """What an ssh command line sets, as fleet's host settings: (setting, value, place) in the
    order they are set; or `refused`, why fleet cannot reach the host as that ssh would."""

    settings: list[tuple[str, object, str]] = field(default_factory=list)
    refused: str | None = None


class _Refused(Exception):
    """A reason fleet refuses the host (the first one found ends the reading)."""


def command_line_settings(
    segments: Sequence[tuple[Sequence[str], str]], destination: str
) -> CommandLine:
    """ssh's options for `destination` (`ssh OPTIONS destination`) as fleet's settings."""
    found = CommandLine()
    try:
        _settings(parse_ssh_argv(segments, destination), destination, found)
    except _Refused as exc:
        return CommandLine(refused=str(exc))
    return found


def _settings(options: SshConfigValues, destination: str, found: CommandLine) -> None:
    if options.refusals:
        raise _Refused("\n".join(options.refusals))
    address = destination
    for option, setting in FIELDS.items():
        if option not in options.values:
            continue
        value = options.values[option]
        if option == "Hostname":
            value = address = percent_expand(str(value), {"h": destination}) or str(value)
        elif option == "UserKnownHostsFile":
            value = value[0] if isinstance(value, list) and value else "/dev/null"
        elif option == "ConnectTimeout" and (not isinstance(value, int) or value <= 0):
            continue
        found.settings.append((setting, value, options.places[option]))
    if options.identity_files:
        paths = tuple(os.path.expanduser(p) for p, _ in options.identity_files)
        place = options.identity_files[0][1]
        found.settings += [("identity_file", paths[0], place), ("identity_files", paths, place)]
    proxied = _proxy(options, found)
    refusals = connection_refusals(options, proxied, address)
    if refusals:
        raise _Refused("\n".join(refusals))


def _proxy(options: SshConfigValues, found: CommandLine) -> bool:
    """Jump or ProxyCommand, as ssh would settle them; True when the host is proxied."""
    state = options.proxy()
    jump, command = state.effective_jump, state.effective_command
    if jump:
        if "," in jump:
            raise _Refused(
                f"{state.jump_place}: jump {jump} chains several jump hosts; fleet tunnels "
                "through one"
            )
        found.settings.append(("jump", jump, state.jump_place))
    elif state.jump == "none":
        found.settings.append(("jump", None, state.jump_place))
    if command:
        try:
            words = command_words(command)
        except ProxyCommandError as exc:
            raise _Refused(f"{state.command_place}: ProxyCommand {command}: {exc}") from exc
        found.settings.append(("proxy_command", words, state.command_place))
    elif state.command is not None and not jump:
        found.settings.append(("proxy_command", None, state.command_place))
    return bool(jump or command)
