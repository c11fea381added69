"""ssh's command line read as ssh (OpenSSH 9.2) reads it: getopt over its options, then each `-o`
read as a config line is (readconf.c's process_config_line). Pure. fleet/inventory/ansible.py
reads Ansible's ssh_args and friends with it.

The first value wins, as on ssh's command line. Honoured: -i, -J, -l, -o, -p (and through -o the
keywords fleet reads of a config file: fleet/inventory/ssh_config_options.py). Harmless to leave
out: output, forwarding, multiplexing and cipher options. Refused, naming where it was written:
what changes where or how ssh connects and fleet cannot do (`REFUSED_FLAGS`), an option ssh does
not know, and a word that is no option (ssh would take it as the host or the command).
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet.inventory.ssh_config_lexer import ConfigSyntaxError, argv_split, split_line
from fleet.inventory.ssh_config_options import (
    ALIASES,
    CANONICAL,
    KNOWN_KEYWORDS,
    ProxyState,
    SshOptions,
    a2port,
    apply_keyword,
    jump_text,
    parse_jump,
)

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


def parse_ssh_argv(segments: Sequence[tuple[Sequence[str], str]], host: str) -> SshOptions:
    """ssh's command-line options (getopt, then process_config_line for each -o) from `segments`
    of words, each with the place it was written (for messages). The first value wins, as ssh's
    command line does; what fleet cannot honour is a refusal naming its place."""
    options = SshOptions()
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
        position = 1
        while position < len(word):
            flag = word[position]
            position += 1
            if flag in WITH_VALUE:
                value = word[position:]
                if not value:
                    if index >= len(words):
                        options.refusals.append(f"{place}: ssh option -{flag} has no value")
                        break
                    value = words[index][0]
                    index += 1
                _flag(options, state, flag, value, place, host)
                break
            if flag not in WITHOUT_VALUE:
                options.refusals.append(f"{place}: -{flag} is not an ssh option")
            elif flag in REFUSED_FLAGS:
                options.refusals.append(f"{place}: ssh -{flag} {REFUSED_FLAGS[flag]}")
    options.proxy_events = []
    if state.jump is not None:
        options.proxy_events.append(("ProxyJump", state.jump, state.jump_place))
    if state.command is not None and not (
        state.command == "none" and state.jump not in (None, "none")
    ):
        options.proxy_events.append(("ProxyCommand", state.command, state.command_place))
    return options


def _flag(
    options: SshOptions, state: ProxyState, flag: str, value: str, place: str, host: str
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
        if state.jump is not None:
            options.refusals.append(
                f"{place}: ssh -J {value}: only a single -J option is permitted"
            )
        elif state.command is not None:
            options.refusals.append(
                f"{place}: ssh -J {value}: cannot be combined with ProxyCommand"
            )
        else:
            try:
                text = (
                    value
                    if value.lower() == "none"
                    else ",".join(jump_text(*h) for h in parse_jump(value))
                )
            except ValueError:
                options.refusals.append(f"{place}: ssh -J {value}: invalid jump host")
                return
            state.jump, state.jump_place = text, place
            state.command, state.command_place = "none", place


def _dash_o(options: SshOptions, state: ProxyState, text: str, place: str) -> None:
    """`-o Keyword=value` (or `-o "Keyword value"`), read like a config line."""
    split = split_line(text)
    if split is None:
        options.refusals.append(f"{place}: -o {text!r} sets nothing")
        return
    keyword, rest = split
    keyword = ALIASES.get(keyword, keyword)
    if keyword in ("host", "match", "include"):
        options.refusals.append(f"{place}: -o {text}: {keyword} is not allowed on the command line")
        return
    if keyword not in KNOWN_KEYWORDS:
        options.refusals.append(f"{place}: -o {text}: ssh does not know {keyword!r}")
        return
    if keyword not in CANONICAL:
        return  # known to ssh, and it does not change where fleet connects or whom it trusts
    try:
        words = argv_split(rest)
        if not rest:
            raise ConfigSyntaxError(place, f'no argument after keyword "{keyword}"')
        scratch = SshOptions()
        apply_keyword(scratch, keyword, rest, words, place, True)
    except (ValueError, ConfigSyntaxError) as exc:
        reason = exc.reason if isinstance(exc, ConfigSyntaxError) else str(exc)
        options.refusals.append(f"{place}: -o {text}: {reason}")
        return
    for name, proxy, where in scratch.proxy_events:
        if name == "ProxyJump":
            state.proxy_jump(proxy, where)
        else:
            state.proxy_command(proxy, where)
    for name, value in scratch.values.items():
        if name not in ("ProxyJump", "ProxyCommand"):
            options.set_first(name, value, place)
    for path, where in scratch.identity_files:
        if path not in [p for p, _ in options.identity_files]:
            options.identity_files.append((path, where))
    options.applied += scratch.applied
