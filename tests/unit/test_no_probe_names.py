"""No generic layer names a probe (issue 47): what fleet knows of a probe on the controller is in
its unit, fleet/units/PROBE/ (docs/layers.md). Every string literal in fleet/ outside fleet/units/
that equals a probe's or a unit's name is counted (docstrings aside); the few that must stay say
why below. Measured when this test came: 119 such literals; after the units took their
knowledge, 34, every one of them below with its reason."""

from __future__ import annotations

import ast

from fleet import registry
from fleet.execution.bundle import available_probes
from tests.conftest import ROOT

FLEET = ROOT / "fleet"

# (word, places, why): a literal that equals a probe's name but means something else there.
ALLOWED = (
    (
        "fabric",
        ("fleet/fabric/", "fleet/cli/fabric.py", "fleet/api/fabric_runs.py", "fleet/api/__init__.py",
         "fleet/cli/root.py", "fleet/schemas/__init__.py", "fleet/models.py",
         "fleet/render/html/page.py", "fleet/shipped.py"),
        "the `fleet fabric` command, its package and API function, the run document's `fabric` "
        "section and its schema kind, the probes/fabric/ folder of its rank program: the command that "
        "makes the fabric result, not the unit",
    ),
    (
        "nccl",
        ("fleet/fabric/", "fleet/cli/fabric.py"),
        "a torch.distributed backend (`--backend nccl|gloo`), not the nccl probe",
    ),
    (
        "nccl",
        ("fleet/analysis/across_hosts/",),
        "a kind of divergence in the fleet.diff/3 document (arch, nccl, import): a published name",
    ),
    (
        "torch",
        ("fleet/fabric/run.py", "fleet/transport/local_python.py",
         "fleet/analysis/across_hosts/check_grade.py"),
        "the Python package torch (found, importable, named in a sentence), not the torch probe",
    ),
    (
        "gpu",
        ("fleet/analysis/baselines/file.py",),
        "the `gpu:` key of a cohort in the fleet.baseline/1 file, a published name",
    ),
    (
        "torch",
        ("fleet/analysis/baselines/identity.py",),
        "a key of a cohort's `versions:` in the fleet.baseline/1 file (the software), published",
    ),
    (
        "nccl",
        ("fleet/analysis/baselines/identity.py",),
        "a key of a cohort's `versions:` in the fleet.baseline/1 file (the software), published",
    ),
)  # fmt: skip
# The unit table names every unit of fleet's own: it is where a unit is added (docs/layers.md).
TABLE = "fleet/registry/__init__.py"


def probe_names() -> set[str]:
    return set(available_probes()) | set(registry.UNITS)


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def literal_probe_names() -> list[tuple[str, int, str]]:
    """(path, line, word) of every literal probe name in fleet/ outside fleet/units/ and the
    unit table."""
    names, found = probe_names(), []
    for path in sorted(FLEET.rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative.startswith("fleet/units/") or relative == TABLE:
            continue
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in skip:
                found.append((relative, node.lineno, str(node.value)))
    return found


def allowed(path: str, word: str) -> bool:
    return any(word == w and path.startswith(places) for w, places, _ in ALLOWED)


def test_no_generic_layer_names_a_probe() -> None:
    named = [f"{path}:{line}: {word!r}" for path, line, word in literal_probe_names()
             if not allowed(path, word)]  # fmt: skip
    assert named == [], "a probe's knowledge belongs in its unit, fleet/units/PROBE/"


def test_every_allowance_is_still_needed() -> None:
    found = literal_probe_names()
    for word, places, why in ALLOWED:
        for place in places:
            assert any(p.startswith(place) and w == word for p, _, w in found), (place, word)
        assert why


def test_the_check_sees_a_probe_name() -> None:
    tree = ast.parse('"""doc"""\nX = "gpubench"\n')
    assert [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and id(n) not in docstrings(tree) and n.value in probe_names()] == ["gpubench"]  # fmt: skip
