"""What a probe must ship: the helper files it imports, shared by the probe tests."""

from __future__ import annotations

import ast

from tests.probes.handrun import PROBES, helper_path


def helpers_imported(name: str) -> set[str]:
    """The shipped helper files (`_x.py`) probe `name` imports, directly or through its helpers:
    what its SHIPS must list for the host to import them."""
    found: set[str] = set()
    pending = [PROBES / f"{name}.py"]
    while pending:
        tree = ast.parse(pending.pop().read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for module in names:
                file_name = f"{module}.py"
                helper = helper_path(file_name) if module.startswith("_") else None
                if helper is not None and file_name not in found:
                    found.add(file_name)
                    pending.append(helper)
    return found
