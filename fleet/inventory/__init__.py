"""Where hosts come from: an inventory source turns a description into validated `Host`s.

`fleet_yaml` reads fleet's own YAML; `nodeset` expands host ranges for every source
(fleet.hostsets folds them back for every output); `--limit` selection lives with the YAML
source for now.
"""

from fleet.inventory.fleet_yaml import (
    Inventory,
    check_name,
    jump_spec_host,
    load_inventory,
    local_inventory,
    parse_inventory,
    select_names,
)
from fleet.inventory.nodeset import expand_hostlist

__all__ = [
    "Inventory",
    "check_name",
    "expand_hostlist",
    "jump_spec_host",
    "load_inventory",
    "local_inventory",
    "parse_inventory",
    "select_names",
]
