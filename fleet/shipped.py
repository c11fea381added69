"""Where fleet's own host-side files are: the repo's top-level `probes/` folder.

In a wheel that folder is the package `fleet._probes` (pyproject maps it), so no generic
top-level package named `probes` lands in site-packages; in a source checkout on sys.path
(tests, the GPU bench scripts) it is importable as `probes`. Everything that reads those files
asks here.

The folder's layout (probes/README.md): the probes at its top; the host runner and its modules in
runner/; fleet fabric's rank program in fabric/; the helpers a probe ships (`SHIPS`) in
helpers/FAMILY/. The bundle ships every file under its own name, flat: on the host a helper is
imported as `import _name` wherever it sits here, so a helper's file name is unique in the
whole folder (tests/probes/test_contract.py).
"""

from __future__ import annotations

import functools
import importlib
from importlib import resources
from importlib.abc import Traversable
from types import ModuleType

INSTALLED, CHECKOUT = "fleet._probes", "probes"
RUNNER_FOLDER, FABRIC_FOLDER, HELPERS_FOLDER = "runner", "fabric", "helpers"


def probes_package() -> str:
    """The name the probes folder is importable under here."""
    try:
        importlib.import_module(INSTALLED)
    except ModuleNotFoundError:
        return CHECKOUT
    return INSTALLED


@functools.lru_cache(maxsize=1)
def probe_folder() -> Traversable:
    """Found once a process: `resources.files` costs a fraction of a millisecond a call, and the
    bundle asks for the folder of every file it ships."""
    return resources.files(probes_package())


def runner_folder() -> Traversable:
    """probes/runner/: the host runner and its RUNNER_MODULES."""
    return probe_folder().joinpath(RUNNER_FOLDER)


def fabric_folder() -> Traversable:
    """probes/fabric/: fleet fabric's rank program."""
    return probe_folder().joinpath(FABRIC_FOLDER)


def helper_file(file_name: str) -> Traversable | None:
    """fleet's own shipped helper `file_name` (`_nvidia_smi.py`), in whichever family folder
    of probes/helpers/ it sits; None when there is none of that name."""
    return _helper_files().get(file_name)


@functools.lru_cache(maxsize=1)
def _helper_files() -> dict[str, Traversable]:
    """Every file of probes/helpers/FAMILY/ by its name, listed once a process (the first family
    in name order wins a name two share, which tests/probes/test_contract.py forbids anyway)."""
    found: dict[str, Traversable] = {}
    for family in sorted(probe_folder().joinpath(HELPERS_FOLDER).iterdir(), key=_name):
        if family.is_dir():
            for entry in family.iterdir():
                if entry.is_file():
                    found.setdefault(entry.name, entry)
    return found


def _name(entry: Traversable) -> str:
    return entry.name


def host_secrets() -> ModuleType:
    """probes/runner/_runner_secrets.py, the host runner's masking, as a module: its secret
    patterns are the controller's too."""
    return importlib.import_module(f"{probes_package()}.{RUNNER_FOLDER}._runner_secrets")
