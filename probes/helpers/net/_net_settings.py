"""NCCL's network settings as NCCL reads them (environment, then its conf files), resolved against
the devices, interfaces and plugin that exist here, and the GID each RoCE port NCCL uses would get.

Not a probe (the leading underscore): shipped with the net probe (its `SHIPS`), stdlib only,
Python 3.8, importable by name on the host.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from _net_plugin import PLUGIN_NET_NAMES
from _net_tree import natural_key, natural_sorted, port_label
from _rdma import gid_family, ipv4_of

# The NCCL settings that choose or shape the network, in the order they are reported.
NET_SETTINGS = (
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_TC",
    "NCCL_IB_SL",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_PCI_RELAXED_ORDERING",
    "NCCL_IB_MERGE_NICS",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_ADAPTIVE_ROUTING",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_DMABUF_ENABLE",
    "NCCL_CROSS_NIC",
    "NCCL_COLLNET_ENABLE",
    "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_SOCKET_FAMILY",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
)


def parse_name_list(value: str) -> Dict[str, Any]:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME as NCCL parses them: a leading '^' excludes, a leading
    '=' (after any '^') matches names exactly instead of as prefixes; entries are comma
    separated, each `name` or `name:port`."""
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    entries = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, _, port = raw.partition(":")
        entries.append({"name": name, "port": int(port) if port.isdigit() else None})
    return {"exclude": exclude, "exact": exact, "entries": entries}


def name_matches(name: str, wanted: str, exact: bool) -> bool:
    return name == wanted if exact else name.startswith(wanted)


def nccl_settings(
    environ: Mapping[str, str], conf_files: Sequence[Tuple[str, Mapping[str, str]]]
) -> Dict[str, Dict[str, str]]:
    """{NAME: {"value", "source"}} for each network setting set, as NCCL reads them: the
    environment, then the conf files in order (the first that sets a name wins)."""
    found: Dict[str, Dict[str, str]] = {}
    for name in NET_SETTINGS:
        if name in environ:
            found[name] = {"value": environ[name], "source": "environment"}
            continue
        for label, settings in conf_files:
            if name in settings:
                found[name] = {"value": settings[name], "source": label}
                break
    return found


def resolve_settings(
    settings: Dict[str, Dict[str, Any]],
    devices: Optional[Mapping[str, Any]],
    netdevs: Optional[Sequence[str]],
    plugins: Mapping[str, Any],
) -> Optional[List[str]]:
    """Resolve each setting that names devices against those that exist, in place (`resolves_to`,
    `names_nothing`, `note`); the problems, one line each, or None when the devices could not be
    read (a setting then cannot be judged)."""
    problems: List[str] = []
    judged = True
    for name, setting in settings.items():
        value = setting["value"]
        if name == "NCCL_IB_HCA":
            ports = _port_names(devices)
            problem = _resolve_list(setting, ports, "RDMA port", with_ports=True)
            judged = judged and ports is not None
        elif name == "NCCL_SOCKET_IFNAME":
            problem = _resolve_list(setting, netdevs, "network interface", with_ports=False)
            judged = judged and netdevs is not None
        elif name == "NCCL_NET":
            problem = _resolve_net(setting, devices, plugins)
            judged = judged and devices is not None
        elif name == "NCCL_NET_PLUGIN":
            problem = _resolve_plugin(setting, plugins)
        else:
            continue
        if problem:
            problems.append("%s=%s (%s): %s" % (name, value, setting["source"], problem))
    return problems if judged or problems else None


def _port_names(devices: Optional[Mapping[str, Any]]) -> Optional[List[Tuple[str, int]]]:
    if devices is None:
        return None
    return [
        (name, int(port))
        for name in natural_sorted(devices)
        for port in sorted(devices[name]["ports"], key=natural_key)
        if port.isdigit()
    ]


def _resolve_list(
    setting: Dict[str, Any],
    existing: Optional[Sequence[Any]],
    what: str,
    with_ports: bool,
) -> Optional[str]:
    """Resolve a name list (NCCL_IB_HCA over (device, port) pairs, NCCL_SOCKET_IFNAME over
    interface names) in place: `resolves_to`, `names_nothing`, `note`; the problem, or None."""
    parsed = parse_name_list(setting["value"])
    if existing is None:
        setting["note"] = "not judged: the %ss could not be read" % what
        return None
    matched, nothing, wider = _match_entries(parsed, existing, with_ports)
    every = ["%s/%s" % item if with_ports else item for item in existing]
    chosen = [x for x in every if x not in matched] if parsed["exclude"] else matched
    setting["resolves_to"] = chosen
    setting["names_nothing"] = nothing
    if wider:
        setting["note"] = "; ".join(wider) + " (NCCL matches prefixes: a leading = matches exactly)"
    return _list_problem(setting, parsed, every, what)


def _match_entries(
    parsed: Mapping[str, Any], existing: Sequence[Any], with_ports: bool
) -> Tuple[List[str], List[str], List[str]]:
    """(what the entries match, the entries that match nothing, notes on prefixes that match
    more than the name given)."""
    matched: List[str] = []
    nothing: List[str] = []
    wider: List[str] = []  # NCCL matches prefixes: mlx5_1 is also mlx5_10 and mlx5_11
    for entry in parsed["entries"]:
        hits = _entry_hits(entry, existing, parsed["exact"], with_ports)
        label = entry["name"] + (":%d" % entry["port"] if entry["port"] is not None else "")
        if hits:
            matched += [h for h in hits if h not in matched]
        else:
            nothing.append(label)
        others = sorted({h.split("/")[0] for h in hits} - {entry["name"]})
        if others and not parsed["exact"]:
            wider.append("%s also matches %s" % (label, ", ".join(natural_sorted(others))))
    return matched, nothing, wider


def _entry_hits(
    entry: Mapping[str, Any], existing: Sequence[Any], exact: bool, with_ports: bool
) -> List[str]:
    """The devices' ports ("mlx5_0/1") or interfaces one entry of the list names."""
    hits = []
    for item in existing:
        name, port = item if with_ports else (item, None)
        if not name_matches(name, entry["name"], exact):
            continue
        if with_ports and entry["port"] is not None and entry["port"] != port:
            continue
        hits.append("%s/%s" % (name, port) if with_ports else name)
    return hits


def _list_problem(
    setting: Dict[str, Any], parsed: Mapping[str, Any], every: List[str], what: str
) -> Optional[str]:
    chosen, nothing = setting["resolves_to"], setting["names_nothing"]
    names = ", ".join(every) or "none"
    if parsed["exclude"]:
        if nothing:
            setting["note"] = "excludes %s, which match no %s here" % (", ".join(nothing), what)
        if not chosen:
            return "excludes every %s here (%s)" % (what, names)
        return None
    if not parsed["entries"]:
        return "names no %s" % what
    if nothing:
        return "%s name%s no %s here (%ss here: %s)" % (
            ", ".join(nothing),
            "s" if len(nothing) == 1 else "",
            what,
            what,
            names,
        )
    return None


def _resolve_net(
    setting: Dict[str, Any], devices: Optional[Mapping[str, Any]], plugins: Mapping[str, Any]
) -> Optional[str]:
    value = setting["value"].strip()
    if value.lower() == "socket":
        return None
    if value.lower() == "ib":
        if devices is None:
            setting["note"] = "not judged: the RDMA devices could not be read"
            return None
        return None if devices else "NCCL's IB transport needs an RDMA device, and there is none"
    loads = plugins.get("loads")
    if loads is None:
        return "names a network plugin's transport, and NCCL loads no plugin here (%s)" % (
            ", ".join(plugins.get("tries") or []) or "NCCL_NET_PLUGIN=none"
        )
    known = PLUGIN_NET_NAMES.get(loads.get("kind") or "")
    if known and value.lower() not in [name.lower() for name in known]:
        return "the plugin NCCL loads (%s) calls its transport %s" % (
            loads.get("kind"),
            " or ".join(known),
        )
    return None


def _resolve_plugin(setting: Dict[str, Any], plugins: Mapping[str, Any]) -> Optional[str]:
    if not plugins.get("tries"):
        return None  # none: NCCL's internal transports, as asked
    if plugins.get("loads") is None:
        return "no such library on NCCL's search path (tried %s)" % ", ".join(plugins["tries"])
    setting["resolves_to"] = [plugins["loads"].get("path")]
    return None


def gid_index_check(
    settings: Mapping[str, Mapping[str, Any]], devices: Optional[Mapping[str, Any]]
) -> Dict[str, Any]:
    """The GID each RoCE port NCCL would use gets from NCCL_IB_GID_INDEX, and whether it is a RoCE
    v2 entry. Unset, NCCL (2.21+) picks a RoCE v2 GID itself: then each such port needs one.
    `problems` is None where the GID tables could not be read."""
    setting = settings.get("NCCL_IB_GID_INDEX", {}).get("value")
    result: Dict[str, Any] = {"setting": setting, "ports": {}, "problems": []}
    ib_disable = settings.get("NCCL_IB_DISABLE", {}).get("value", "").strip()
    net = settings.get("NCCL_NET", {}).get("value", "").strip().lower()
    if ib_disable not in ("", "0") or (net and net != "ib"):
        result["note"] = "NCCL's IB transport is not used here (NCCL_IB_DISABLE / NCCL_NET)"
        return result
    if devices is None:
        result["problems"] = None
        return result
    hca = settings.get("NCCL_IB_HCA", {}).get("resolves_to")
    problems: List[str] = []
    for name in natural_sorted(devices):
        for number, port in sorted(devices[name]["ports"].items()):
            label = port_label(name, number)
            if (port["link_layer"] or "").lower() != "ethernet" or port["state"] != "ACTIVE":
                continue
            if hca is not None and label not in hca:
                continue
            if port["gids"] is None:
                result["problems"] = None
                return result
            entry, problem = _port_gid(port["gids"], setting)
            result["ports"][label] = entry
            if problem:
                problems.append("%s: %s" % (label, problem))
    result["problems"] = problems
    return result


def _port_gid(gids: Mapping[str, Any], setting: Optional[str]) -> Tuple[Dict[str, Any], str]:
    table = ", ".join(
        "%s %s %s" % (index, g["type"] or "type?", ipv4_of(g["gid"]) or gid_family(g["gid"]))
        for index, g in gids.items()
    )
    if setting is None:
        v2 = [i for i, g in gids.items() if g["type"] == "RoCE v2"]
        v2_ipv4 = [i for i in v2 if gid_family(gids[i]["gid"]) == "ipv4"]
        pick = (v2_ipv4 or v2)[0] if v2 else None
        entry = {"index": pick, "type": gids[pick]["type"] if pick else None}
        entry["gid"] = gids[pick]["gid"] if pick else None
        if not v2:
            return entry, "no RoCE v2 GID for NCCL to pick (GID table: %s)" % (table or "empty")
        return entry, ""
    index = setting.strip()
    gid = gids.get(index)
    entry = {
        "index": index,
        "type": gid["type"] if gid else None,
        "gid": gid["gid"] if gid else None,
    }
    if gid is None:
        return entry, "GID index %s is empty (GID table: %s)" % (index, table or "empty")
    if gid["type"] != "RoCE v2":
        return entry, "GID index %s is %s, not RoCE v2 (GID table: %s)" % (
            index,
            gid["type"],
            table,
        )
    return entry, ""
