"""What an ssh option means, read as OpenSSH 9 reads it (readconf.c's process_config_line, for the
keywords that say where and how fleet connects): the keyword tables, each value's checks, and
`SshConfigValues`, what the lines (or ssh's command line) that applied to one host set. Pure.

- the first value obtained for a keyword wins; IdentityFile accumulates;
- ProxyCommand takes the rest of the line as written (its comment too, as OpenSSH does: the shell
  it runs under ignores it; _proxy_command.py splits it);
- ProxyJump and ProxyCommand exclude each other in the order they come (`ProxyJump none` only
  stops later ProxyJumps): `ProxyState`;
- a value is checked whether or not its line applies, as ssh checks it;
- percent_expand is OpenSSH's %-tokens (and ${VAR}), for the values that take them where they
  are applied: Hostname's %h (_reader.py), IdentityFile and the like
  (_apply.py).

Keywords fleet does not read are skipped in a config file without checking their values (OpenSSH
rejects unknown ones: KNOWN_KEYWORDS says which ssh knows, for `-o`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass, field

from fleet.inventory.openssh._lexer import WHITESPACE, ConfigSyntaxError

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

# ----------------------------------------------------------------------------------- values


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
class SshConfigValues:
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
    options: SshConfigValues, keyword: str, rest: str, words: list[str], place: str, active: bool
) -> None:
    """One line of a keyword fleet reads (process_config_line's cases for them). Values are
    checked whether or not the line applies, as OpenSSH does; only applying lines set them."""
    name = CANONICAL[keyword]
    if name in ("ProxyCommand", "ProxyJump"):
        value = _proxy_value(name, rest, place)
        if active:
            options.proxy_events.append((name, value, place))
            options.set_first(name, value, place)
        return
    if name == "IdentityFile":
        path = _one(words, name, place)
        if active and path not in [p for p, _ in options.identity_files]:
            options.identity_files.append((path, place))
        return
    checked = _value(name, words, place)
    if active:
        if name not in options.values and name in IGNORED_SHOWN:
            options.applied.append((place, name, " ".join(words)))
        options.set_first(name, checked, place)


def _proxy_value(name: str, rest: str, place: str) -> str:
    """ProxyCommand: the rest of the line as written; ProxyJump: its hops, checked, as fleet
    writes them (or `none`)."""
    raw = rest.lstrip(WHITESPACE + "=")
    if name == "ProxyCommand":
        return raw
    text = raw if raw.lower() == "none" else raw.split("#", 1)[0].rstrip(WHITESPACE)
    if text.lower() == "none":
        return text
    try:
        hops = parse_jump(text)
    except ValueError as exc:
        raise ConfigSyntaxError(place, str(exc)) from exc
    return ",".join(jump_text(*hop) for hop in hops)


def _value(name: str, words: list[str], place: str) -> object:
    """The value of a keyword fleet reads other than the proxies and IdentityFile."""
    if name in ("UserKnownHostsFile", "CanonicalDomains", "CanonicalizePermittedCNAMEs"):
        if not words or "" in words:
            raise ConfigSyntaxError(place, f"{name}: missing argument")
        return [] if [w.lower() for w in words] == ["none"] else list(words)
    word = _one(words, name, place)
    if name == "Port":
        port = a2port(word)
        if port == -1:
            raise ConfigSyntaxError(place, f"Bad port {word!r}")
        return port
    if name in ("ConnectTimeout", "ControlPersist"):
        return _time_value(name, word, place)
    if name == "CanonicalizeMaxDots":
        if not word.isdigit():
            raise ConfigSyntaxError(place, f"{name}: bad number {word!r}")
        return int(word)
    if name in ("IdentitiesOnly", "ProxyUseFdpass", *MULTISTATE):
        return _choice(words, name, place)
    return word  # Hostname, User, BindAddress, BindInterface, HostKeyAlias


def _time_value(name: str, word: str, place: str) -> object:
    if name == "ControlPersist" and word.lower() in FLAGS:
        return FLAGS[word.lower()]
    if word == "none":
        return None
    seconds = convtime(word)
    if seconds == -1:
        raise ConfigSyntaxError(place, f"{name}: invalid time value {word!r}")
    return seconds


# ---------------------------------------------------------------------------------- %-tokens

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
