"""`ansible-inventory -i FILE --list` for many files in one process, so that Ansible's start-up
(~1 s) is paid once: its own InventoryCLI (the class behind the ansible-inventory command) builds
each file's JSON with a fresh loader, inventory and variable manager. Usage:
    python ansible_list.py FILE [FILE ...]   → one JSON object {FILE: document, …} on stdout
Run with the interpreter that has ansible-core; tests/corpus/test_corpus.py checks its answer
against the ansible-inventory command itself for one file."""

from __future__ import annotations

import json
import sys

from ansible.cli.inventory import InventoryCLI
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager


def main(sources: list[str]) -> int:
    cli = InventoryCLI(["ansible-inventory", "--list", "-i", sources[0]])
    cli.parse()
    documents = {}
    for source in sources:
        cli.loader = DataLoader()
        cli.inventory = InventoryManager(loader=cli.loader, sources=[source])
        cli.vm = VariableManager(loader=cli.loader, inventory=cli.inventory)
        documents[source] = cli.json_inventory(cli._get_group("all"))
    json.dump(documents, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
