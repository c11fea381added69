"""Where fleet's own host-side files are: the repo's top-level `probes/` folder.

In a wheel that folder is the package `fleet._probes` (pyproject maps it), so no generic
top-level package named `probes` lands in site-packages; in a source checkout on sys.path
(tests, the GPU bench scripts) it is importable as `probes`. Everything that reads those files
asks here.
"""

from __future__ import annotations

import importlib
from importlib import resources
from importlib.abc import Traversable
from types import ModuleType

INSTALLED, CHECKOUT = "fleet._probes", "probes"


def probes_package() -> str:
    """The name the probes folder is importable under here."""
    try:
        importlib.import_module(INSTALLED)
    except ModuleNotFoundError:
        return CHECKOUT
    return INSTALLED


def probe_folder() -> Traversable:
    return resources.files(probes_package())


def host_secrets() -> ModuleType:
    """probes/_runner_secrets.py, the host runner's masking, as a module: its secret patterns
    are the controller's too."""
    return importlib.import_module(f"{probes_package()}._runner_secrets")
