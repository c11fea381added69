"""Which kind of inventory a file is: fleet's YAML or an Ansible inventory, told apart by content
(`--inventory-format` forces one), and the one entry point that loads either."""

from __future__ import annotations

import os
import re

from fleet.errors import UsageError
from fleet.inventory.fleet_yaml import TOP_LEVEL, Inventory, load_inventory
from fleet.yamlfile import load_plain

FORMATS = ("auto", "fleet", "ansible")
TOP_KEY_RE = re.compile(r"^([^\s#:'\"][^:]*|'[^']*'|\"[^\"]*\"):")
SNIFF_BYTES = 64 * 1024


def load_any_inventory(path: str, inventory_format: str = "auto") -> Inventory:
    if inventory_format not in FORMATS:
        raise UsageError(
            f"--inventory-format {inventory_format!r} is not one of: {', '.join(FORMATS)}"
        )
    kind = detect_format(path) if inventory_format == "auto" else inventory_format
    if kind == "ansible":
        from fleet.inventory.ansible import load_ansible_inventory

        return load_ansible_inventory(path)
    return load_inventory(path)


def detect_format(path: str) -> str:
    """'ansible' for an executable (dynamic inventory), an INI file, a plugin config or an Ansible
    YAML inventory; 'fleet' for fleet's YAML and anything unreadable (its loader says why)."""
    if os.path.isdir(path):
        return "ansible"  # an inventory folder: only Ansible reads those
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return "fleet"
    if head.startswith("#!") or (os.access(path, os.X_OK) and os.path.isfile(path)):
        return "ansible"
    return sniff_text(head)


def sniff_text(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not _comment(line)]
    if not lines:
        return "fleet"  # empty: fleet's loader names the problem
    if lines[0].lstrip().startswith("{"):
        return _sniff_flow_mapping(text)  # JSON, or YAML written in flow style
    if lines[0].lstrip().startswith("["):
        return "ansible"  # an INI section header: [gpu], [gpu:vars]
    top_keys = {m.group(1).strip("'\"") for line in lines if (m := TOP_KEY_RE.match(line))}
    if not top_keys:
        return "ansible"  # bare host lines: `gpu-01 ansible_host=10.0.0.1`
    if top_keys & {"hosts", "defaults"}:
        return "fleet"
    return "ansible" if top_keys - set(TOP_LEVEL) else "fleet"


# A top-level key of a JSON / flow-style document: `{"hosts": …` or `, defaults: …` at depth 1.
FLOW_TOP_KEY_RE = re.compile(r"""^\s*\{?\s*["']?(hosts|defaults|groups)["']?\s*:""")


def _sniff_flow_mapping(text: str) -> str:
    """A one-line JSON or flow-style document: fleet's when its top level has fleet's keys
    (`hosts`, `defaults`), else Ansible's (`{"all": {"hosts": …}}`). JSON is read as JSON
    (a 2,000-host inventory took PyYAML's Python loader 0.2 s), anything else by libyaml where
    PyYAML has it."""
    import json

    import yaml  # for its error: load_plain's parse is libyaml's where PyYAML has it

    try:
        document = json.loads(text)
    except ValueError:  # YAML's flow style, or cut off at the sniffed size
        try:
            document = load_plain(text)
        except yaml.YAMLError:  # cut off at the sniffed size: judge by the first key
            return "fleet" if FLOW_TOP_KEY_RE.match(text) else "ansible"
    if isinstance(document, dict) and set(document) & {"hosts", "defaults"}:
        return "fleet"
    return "ansible"


def _comment(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith("#") or stripped.startswith(";") or stripped == "---"
