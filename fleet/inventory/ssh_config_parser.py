"""OpenSSH's client configuration language, read as OpenSSH 9 reads it (readconf.c, ssh.c), for the
keywords that say where and how fleet connects. No asyncssh: its parser differs from OpenSSH's
(end-of-line comments, commas in Host lines, ProxyJump against ProxyCommand, Hostname's case).

What is read as OpenSSH does:
- a line is `Keyword value…` or `Keyword=value…`; values are split as OpenSSH's argv_split does
  (double or single quotes, backslash escapes), and a word starting with `#` ends the line: an
  end-of-line comment (`HostName 10.0.0.5  # rack 3`) is no error;
- ProxyCommand takes the rest of the line as written (its comment too, as OpenSSH does: the shell
  it runs under ignores it; fleet/inventory/proxy_command.py splits it);
- the first value obtained for a keyword wins; IdentityFile accumulates; Host patterns are matched
  one by one, case-sensitively, `!` excluding; Match takes `all`, `host`, `originalhost`, `user`,
  `localuser`, `canonical` and `final` (with OpenSSH's second, final pass);
- Include reads each file a glob names (relative to ~/.ssh), its Host blocks scoped to it;
- ProxyJump and ProxyCommand exclude each other in the order they come (`ProxyJump none` only
  stops later ProxyJumps).

Not evaluated: `Match exec` (fleet runs no command to choose a host's settings) and criteria newer
than OpenSSH 9.2; a host such a line would decide is refused, naming the line (`refusals`).
Keywords fleet does not read are skipped without checking their values (OpenSSH rejects unknown
ones). A syntax error is a `ConfigSyntaxError` naming file and line, as ssh fails on one.

This module knows nothing of fleet's hosts: fleet/inventory/ssh_config.py applies its result, and
fleet/inventory/ansible.py reads Ansible's ssh command lines with `parse_ssh_argv`.
"""

from __future__ import annotations

import functools
import getpass
import glob
import ipaddress
import os
import re
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

WHITESPACE = " \t\r\n"
MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
MAX_FILE_BYTES = 4 * 1024 * 1024
# Match criteria of newer OpenSSH releases: fleet cannot evaluate them (nor can OpenSSH 9.2).
NEWER_CRITERIA = ("localnetwork", "tagged", "version", "sessiontype", "command")

# Every client keyword OpenSSH knows (readconf.c's table, 9.2 to 10, and Debian's GSSAPI ones): a `-o` option that is none of
# these makes ssh exit ("Bad configuration option"); in a config file fleet skips it.
KNOWN_KEYWORDS = frozenset(
    """addkeystoagent addressfamily afstokenpassing batchmode bindaddress bindinterface
    canonicaldomains canonicalizefallbacklocal canonicalizehostname canonicalizemaxdots
    canonicalizepermittedcnames casignaturealgorithms certificatefile challengeresponseauthentication
    channeltimeout checkhostip cipher ciphers clearallforwardings compression compressionlevel
    connectionattempts connecttimeout controlmaster controlpath controlpersist dsaauthentication
    dynamicforward enableescapecommandline enablesshkeysign escapechar exitonforwardfailure
    fallbacktorsh fingerprinthash forkafterauthentication forwardagent forwardx11
    forwardx11timeout forwardx11trusted gatewayports globalknownhostsfile globalknownhostsfile2
    gssapiauthentication gssapiclientidentity gssapidelegatecredentials gssapikexalgorithms
    gssapikeyexchange gssapirenewalforcesrekey gssapiserveridentity gssapitrustdns hashknownhosts host hostbasedacceptedalgorithms
    hostbasedauthentication hostbasedkeytypes hostkeyalgorithms hostkeyalias hostname identitiesonly
    identityagent identityfile identityfile2 ignoreunknown include ipqos kbdinteractiveauthentication
    kbdinteractivedevices keepalive kerberosauthentication kerberostgtpassing kexalgorithms
    knownhostscommand localcommand localforward loglevel logverbose macs match
    nohostauthenticationforlocalhost numberofpasswordprompts obscurekeystroketiming
    passwordauthentication permitlocalcommand permitremoteopen pkcs11provider port
    preferredauthentications protocol proxycommand proxyjump proxyusefdpass
    pubkeyacceptedalgorithms pubkeyacceptedkeytypes pubkeyauthentication refuseconnection rekeylimit
    remotecommand remoteforward requestTTY requiredrsasize revokedhostkeys rhostsauthentication
    rhostsrsaauthentication rsaauthentication securitykeyprovider sendenv serveralivecountmax
    serveraliveinterval sessiontype setenv skeyauthentication smartcarddevice stdinnull
    streamlocalbindmask streamlocalbindunlink stricthostkeychecking syslogfacility tag
    tcpkeepalive tisauthentication tunnel tunneldevice updatehostkeys useprivilegedport user
    userknownhostsfile userknownhostsfile2 useroaming usersh verifyhostkeydns versionaddendum
    visualhostkey warnweakcrypto xauthlocation""".lower().split()
)
CANONICAL = {  # the keywords fleet reads, by their lower-case form
    k.lower(): k
    for k in (
        "Hostname",
        "Port",
        "User",
        "IdentityFile",
        "IdentitiesOnly",
        "UserKnownHostsFile",
        "ProxyJump",
        "ProxyCommand",
        "ConnectTimeout",
        "CanonicalizeHostname",
        "CanonicalDomains",
        "CanonicalizeMaxDots",
        "CanonicalizePermittedCNAMEs",
        "ProxyUseFdpass",
        "BindAddress",
        "BindInterface",
        "HostKeyAlias",
        "StrictHostKeyChecking",
        "ControlMaster",
        "ControlPersist",
    )
}
ALIASES = {"identityfile2": "identityfile"}
FLAGS = {"yes": True, "true": True, "no": False, "false": False}
# Keywords fleet leaves out whose value is worth a warning when it applies to a host.
IGNORED_SHOWN = ("StrictHostKeyChecking", "ControlMaster", "ControlPersist", "HostKeyAlias")
MULTISTATE: dict[str, dict[str, object]] = {
    "CanonicalizeHostname": {"always": "always"},
    "StrictHostKeyChecking": {"ask": "ask", "accept-new": "accept-new", "off": False},
    "ControlMaster": {"ask": "ask", "auto": "auto", "autoask": "autoask"},
}


class ConfigSyntaxError(Exception):
    """A line OpenSSH rejects: ssh fails on it whatever host is asked for."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"{place}: {reason}")
        self.place, self.reason = place, reason


# ------------------------------------------------------------------------------------ words


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


# --------------------------------------------------------------------------------- patterns


def match_pattern(text: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: `*` and `?` wildcards, case-sensitive, nothing else special."""
    return _pattern_regex(pattern).fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.DOTALL)


def match_pattern_list(text: str, patterns: str, lower: bool = False) -> int:
    """OpenSSH's match_pattern_list: 1 if a pattern of the comma list matches, -1 if a negated one
    does, 0 if none."""
    positive = 0
    for raw in patterns.split(","):
        negated = raw.startswith("!")
        pattern = raw[1:] if negated else raw
        if match_pattern(text, pattern.lower() if lower else pattern):
            if negated:
                return -1
            positive = 1
    return positive


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def a2port(text: str) -> int:
    """OpenSSH's a2port: 1–65535 or a service name; -1 when neither."""
    if text.isdigit():
        port = int(text)
        return port if 0 < port <= 65535 else -1
    try:
        return socket.getservbyname(text, "tcp")
    except OSError:
        return -1


def convtime(text: str) -> int:
    """OpenSSH's convtime: `90`, `1m30s`, `2h`; -1 when not a time."""
    units = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    parts = re.findall(r"(\d+)([smhdwSMHDW]?)", text)
    if not text or "".join(n + u for n, u in parts) != text:
        return -1
    return sum(int(n) * units[u.lower()] for n, u in parts)


JUMP_PART_RE = re.compile(
    r"^(?:(?P<user>.*)@)?(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[^:]*))?$"
)


def parse_jump(text: str) -> list[tuple[str | None, str, int | None]]:
    """ProxyJump's `[user@]host[:port]` or `ssh://[user@]host[:port]` hops, comma-separated."""
    hops = []
    for part in text.split(","):
        spec = part[len("ssh://") :] if part.startswith("ssh://") else part
        if part.startswith("ssh://") and "/" in spec:
            raise ValueError(f"Invalid ProxyJump {text!r}")
        user, _, hostport = spec.rpartition("@") if "@" in spec else (None, "", spec)
        match = JUMP_PART_RE.match(hostport)
        host = match["host"].strip("[]") if match else ""
        port = a2port(match["port"]) if match and match["port"] is not None else None
        if not match or not host or port == -1 or (user is not None and not user):
            raise ValueError(f"Invalid ProxyJump {text!r}")
        hops.append((user, host, port))
    return hops


def jump_text(user: str | None, host: str, port: int | None) -> str:
    """A hop as fleet's `jump` setting writes it: [user@]host[:port], IPv6 in brackets."""
    bracketed = f"[{host}]" if ":" in host else host
    return f"{user + '@' if user else ''}{bracketed}{f':{port}' if port else ''}"


# ---------------------------------------------------------------------------------- options


@dataclass
class ProxyState:
    """OpenSSH's jump_host / proxy_command pair, with its rules: `ProxyJump HOST` wins only when
    neither is set and then sets proxy_command to none; `ProxyJump none` stops later ProxyJumps
    only; ProxyCommand (none too) is taken when proxy_command is unset."""

    jump: str | None = None  # "none", or the hops as written (ssh:// and a comment removed)
    command: str | None = None  # "none", or the command as written
    jump_place: str = ""
    command_place: str = ""

    def proxy_jump(self, value: str, place: str) -> None:
        if value.lower() == "none":
            if self.jump is None:
                self.jump, self.jump_place = "none", place
        elif self.jump is None and self.command is None:
            self.jump, self.jump_place = value, place
            self.command, self.command_place = "none", place

    def proxy_command(self, value: str, place: str) -> None:
        if self.command is None:
            self.command, self.command_place = value, place

    @property
    def effective_jump(self) -> str | None:
        return None if self.jump in (None, "none") else self.jump

    @property
    def effective_command(self) -> str | None:
        if self.effective_jump or self.command is None or self.command.lower() == "none":
            return None
        return self.command


@dataclass
class SshOptions:
    """What the lines that applied to one host set: each keyword's first value and its place
    ("file:line"), every IdentityFile, ignored keywords that applied, and refusals."""

    values: dict[str, object] = field(default_factory=dict)
    places: dict[str, str] = field(default_factory=dict)
    identity_files: list[tuple[str, str]] = field(default_factory=list)
    # ProxyJump / ProxyCommand lines that applied, in order, replayed over what the inventory set
    proxy_events: list[tuple[str, str, str]] = field(default_factory=list)
    applied: list[tuple[str, str, str]] = field(default_factory=list)  # (place, keyword, value)
    refusals: list[str] = field(default_factory=list)

    def set_first(self, keyword: str, value: object, place: str) -> None:
        if keyword not in self.values:
            self.values[keyword] = value
            self.places[keyword] = place

    def get(self, keyword: str, default: object = None) -> object:
        return self.values.get(keyword, default)

    def proxy(self, preset: ProxyState | None = None) -> ProxyState:
        """The proxy these lines give, after what `preset` (the command line) already set."""
        state = ProxyState(**vars(preset)) if preset else ProxyState()
        for keyword, value, place in self.proxy_events:
            if keyword == "ProxyJump":
                state.proxy_jump(value, place)
            else:
                state.proxy_command(value, place)
        return state


def _one(words: list[str], keyword: str, place: str) -> str:
    if not words or words[0] == "":
        raise ConfigSyntaxError(place, f"{keyword}: missing argument")
    if len(words) > 1:
        raise ConfigSyntaxError(place, f"keyword {keyword} extra arguments at end of line")
    return words[0]


def _choice(words: list[str], keyword: str, place: str) -> object:
    word = _one(words, keyword, place)
    choices: dict[str, object] = {**FLAGS, **MULTISTATE.get(keyword, {})}
    if word.lower() not in choices:
        raise ConfigSyntaxError(place, f"{keyword}: unsupported option {word!r}")
    return choices[word.lower()]


def apply_keyword(
    options: SshOptions, keyword: str, rest: str, words: list[str], place: str, active: bool
) -> None:
    """One line of a keyword fleet reads (process_config_line's cases for them). Values are
    checked whether or not the line applies, as OpenSSH does; only applying lines set them."""
    name = CANONICAL[keyword]
    value: object
    if name == "ProxyCommand":
        value = rest.lstrip(WHITESPACE + "=")
        if active:
            options.proxy_events.append((name, str(value), place))
            options.set_first(name, value, place)
        return
    if name == "ProxyJump":
        raw = rest.lstrip(WHITESPACE + "=")
        text = raw if raw.lower() == "none" else raw.split("#", 1)[0].rstrip(WHITESPACE)
        if text.lower() != "none":
            try:
                hops = parse_jump(text)
            except ValueError as exc:
                raise ConfigSyntaxError(place, str(exc)) from exc
            text = ",".join(jump_text(*hop) for hop in hops)
        if active:
            options.proxy_events.append((name, text, place))
            options.set_first(name, text, place)
        return
    if name == "IdentityFile":
        path = _one(words, name, place)
        if active and path not in [p for p, _ in options.identity_files]:
            options.identity_files.append((path, place))
        return
    if name in ("UserKnownHostsFile", "CanonicalDomains", "CanonicalizePermittedCNAMEs"):
        if not words or "" in words:
            raise ConfigSyntaxError(place, f"{name}: missing argument")
        value = [] if [w.lower() for w in words] == ["none"] else list(words)
    elif name == "Port":
        value = a2port(_one(words, name, place))
        if value == -1:
            raise ConfigSyntaxError(place, f"Bad port {words[0]!r}")
    elif name in ("ConnectTimeout", "ControlPersist"):
        word = _one(words, name, place)
        if name == "ControlPersist" and word.lower() in FLAGS:
            value = FLAGS[word.lower()]
        else:
            value = None if word == "none" else convtime(word)
            if value == -1:
                raise ConfigSyntaxError(place, f"{name}: invalid time value {word!r}")
    elif name == "CanonicalizeMaxDots":
        word = _one(words, name, place)
        if not word.isdigit():
            raise ConfigSyntaxError(place, f"{name}: bad number {word!r}")
        value = int(word)
    elif name in ("IdentitiesOnly", "ProxyUseFdpass", *MULTISTATE):
        value = _choice(words, name, place)
    else:  # Hostname, User, BindAddress, BindInterface, HostKeyAlias
        value = _one(words, name, place)
    if active:
        if name not in options.values and name in IGNORED_SHOWN:
            options.applied.append((place, name, " ".join(words)))
        options.set_first(name, value, place)


# ---------------------------------------------------------------------------------- reading


@dataclass
class _Pass:
    host: str  # what Host lines match: the name as given; in the final pass, the real hostname
    original: str  # the name as given (Match originalhost, %n)
    final: bool
    local_user: str
    want_final: bool = False


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
            apply_keyword(SshOptions(), keyword, rest, words, place, True)
        except ConfigSyntaxError as exc:
            return _Line(place, error=exc)
    return _Line(place, keyword, rest, words)


class ConfigReader:
    """Reads ssh_config files (each as `ssh -F FILE` would) for one host name at a time; each file
    is read from disk and split into lines once."""

    def __init__(self, paths: Sequence[Path], local_user: str | None = None) -> None:
        self.paths = tuple(paths)
        self.local_user = local_user or getpass.getuser()
        self._lines: dict[str, list[_Line]] = {}

    def resolve(self, name: str) -> SshOptions:
        """What the files say for `ssh name`: a first pass, and the final pass a `Match final` (or
        CanonicalizeHostname) asks for, matching Host lines against the real hostname."""
        options = SshOptions()
        first = _Pass(name, name, False, self.local_user)
        self._read_all(options, first)
        hostname = expand_hostname(options, name)
        if hostname is not None:
            options.values["Hostname"] = hostname if is_address(hostname) else hostname.lower()
        if first.want_final or options.get("CanonicalizeHostname", False):
            configured = "Hostname" in options.values
            host = str(options.values.get("Hostname") or name)
            options.values["Hostname"] = host if is_address(host) else host.lower()
            self._read_all(
                options, _Pass(str(options.values["Hostname"]), name, True, self.local_user)
            )
            if not configured:
                del options.values["Hostname"]
        options.refusals = list(dict.fromkeys(options.refusals))
        return options

    def _read_all(self, options: SshOptions, state: _Pass) -> None:
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
        options: SshOptions,
        state: _Pass,
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
        options: SshOptions,
        state: _Pass,
        active: bool | str,
        never: bool,
        depth: int,
    ) -> bool | str:
        if line.error:
            raise line.error
        keyword, place = line.keyword, line.place
        if keyword == "match":
            decided = self._match(line.rest, place, options, state)
            return False if never else decided
        if keyword == "host":
            return self._host(line.words, place, state) and not never
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

    def _host(self, words: list[str], place: str, state: _Pass) -> bool:
        matched = False
        for word in words:
            if not word:
                raise ConfigSyntaxError(place, "keyword host empty argument")
            negated = word.startswith("!")
            if match_pattern(state.host, word[1:] if negated else word):
                if negated:
                    return False
                matched = True
        return matched

    def _include(
        self,
        words: list[str],
        place: str,
        options: SshOptions,
        state: _Pass,
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

    # --------------------------------------------------------------------------------- Match

    def _match(self, rest: str, place: str, options: SshOptions, state: _Pass) -> bool | str:
        """OpenSSH's match_cfg_line: every criterion must hold. A criterion fleet cannot evaluate
        (exec, newer ones) makes the block undecided: its reason, a refusal if the block sets a
        keyword fleet reads."""
        try:
            words = list(strdelim_words(rest))
        except ValueError as exc:
            raise ConfigSyntaxError(place, f"Match: {exc}") from exc
        host = self._match_host(options, state)
        user = str(options.get("User") or state.local_user)
        result: bool | str = True
        attributes, index = 0, 0
        while index < len(words) and words[index] and not words[index].startswith("#"):
            word = words[index]
            index += 1
            negate = word.startswith("!")
            criterion = (word[1:] if negate else word).lower()
            if criterion == "all":
                after = words[index] if index < len(words) else ""
                if attributes > 1 or (after and not after.startswith("#")):
                    raise ConfigSyntaxError(
                        place, f"'{word}' cannot be combined with other Match attributes"
                    )
                return (not negate) if result is True else result
            attributes += 1
            if criterion in ("canonical", "final"):
                if criterion == "final":
                    state.want_final = True
                if state.final == negate:
                    result = False
                continue
            if index >= len(words) or not words[index] or words[index].startswith("#"):
                raise ConfigSyntaxError(place, f"Missing Match criteria for {criterion}")
            argument = words[index]
            index += 1
            if criterion == "exec" or criterion in NEWER_CRITERIA:
                if result is True:  # OpenSSH runs `exec` only when the criteria before it held
                    result = (
                        f"{place}: Match {criterion} {argument!r} is not evaluated by fleet"
                        + (
                            " (it runs no command to choose a host's settings)"
                            if criterion == "exec"
                            else " (a criterion newer than OpenSSH 9.2)"
                        )
                    )
                continue
            subject = {
                "host": host,
                "originalhost": state.original,
                "user": user,
                "localuser": state.local_user,
            }.get(criterion)
            if subject is None:
                raise ConfigSyntaxError(place, f"Unsupported Match attribute {criterion}")
            lower = criterion in ("host", "originalhost")
            found = match_pattern_list(subject.lower() if lower else subject, argument, lower)
            if (found == 1) == negate:
                result = False
        if attributes == 0:
            raise ConfigSyntaxError(place, "One or more attributes required for Match")
        return result

    @staticmethod
    def _match_host(options: SshOptions, state: _Pass) -> str:
        if state.final:
            return state.host
        hostname = options.get("Hostname")
        if hostname is None:
            return state.host
        expanded = percent_expand(str(hostname), {"h": state.host})
        return expanded if expanded is not None else str(hostname)


def expand_hostname(options: SshOptions, name: str) -> str | None:
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


TOKEN_RE = re.compile(r"%(.?)")
ENV_RE = re.compile(r"\$\{([^}]*)\}")


def percent_expand(text: str, tokens: dict[str, str], environment: bool = False) -> str | None:
    """OpenSSH's percent_expand (and ${VAR} with `environment`); None for an unknown token or an
    unset variable, on which ssh exits."""
    failed = False

    def token(match: re.Match[str]) -> str:
        nonlocal failed
        key = match[1]
        if key == "%":
            return "%"
        if key not in tokens:
            failed = True
            return ""
        return tokens[key]

    def variable(match: re.Match[str]) -> str:
        nonlocal failed
        value = os.environ.get(match[1])
        if not match[1] or value is None:
            failed = True
            return ""
        return value

    expanded = ENV_RE.sub(variable, text) if environment else text
    expanded = TOKEN_RE.sub(token, expanded)
    return None if failed else expanded


# ------------------------------------------------------------------------ ssh command lines

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
