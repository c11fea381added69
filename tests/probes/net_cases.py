"""The net probe run on its golden sysfs trees: shared by the probe's tests, the rule tests and the
report tests. Each tree is built by net_trees.py from the captures in tests/probes/golden/net/
(real ibstat/sysfs/show_gids outputs, each with its SOURCE) into a temporary folder once per test
process: git keeps no empty folder, and in sysfs an empty folder is a fact (an empty
/sys/class/infiniband, a loaded module's /sys/module/NAME), so the trees are not committed."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.probes import net_trees
from tests.probes.handrun import load_helper, load_probe

NET = load_probe("net")
# Its helpers, the same modules the probe imported.
RDMA = load_helper("_rdma")
KERNEL = load_helper("_net_kernel")
PLUGIN = load_helper("_net_plugin")
SETTINGS = load_helper("_net_settings")
GOLDEN = net_trees.GOLDEN
CASES = sorted(net_trees.CASES)


@functools.cache
def case_root(name: str) -> Path:
    """Case `name`'s sysfs tree, built once per process (removed when it ends)."""
    root = Path(_trees()) / name
    net_trees.build(name, root)
    return root


@functools.cache
def _trees() -> str:
    folder = tempfile.mkdtemp(prefix="fleet-net-trees-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def case_env(name: str) -> dict[str, str]:
    """The NCCL settings (and LD_LIBRARY_PATH, HOME) case `name` is read with."""
    return dict(json.loads((GOLDEN / name / "env.json").read_text()))


def probe_tree(
    root: Path | str,
    env: dict[str, str] | None = None,
    ldconfig: str | None = None,
    python_paths: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The probe's data for the host under `root`, without its timings."""
    data: dict[str, Any] = NET.probe_host(str(root), env or {}, ldconfig, list(python_paths))
    data.pop("timings_s")
    return data


def case_data(name: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The probe's data for case `name`, with its own env.json unless `env` is given."""
    return probe_tree(case_root(name), case_env(name) if env is None else env)


def write_expected() -> None:
    """Rewrite every case's expected.json from the probe's reading (then read the diff)."""
    for name in CASES:
        text = json.dumps(case_data(name), indent=2, sort_keys=True) + "\n"
        (GOLDEN / name / "expected.json").write_text(text)


def copy_case(name: str, tmp_path: Path) -> Path:
    """A writable copy of case `name`'s tree (symlinks kept), to make a fault in."""
    root = tmp_path / name
    shutil.copytree(case_root(name), root, symlinks=True)
    return root


def replace_file(path: Path, text: str) -> None:
    """Write a sysfs file of a copied tree (through its symlinks, as the kernel shows it)."""
    real = Path(os.path.realpath(path))
    real.unlink()
    real.write_text(text)
