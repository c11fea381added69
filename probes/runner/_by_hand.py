"""Runs one of fleet's probes by hand, as an operator would, with the helpers it ships:

    python3 probes/runner/_by_hand.py NAME ['{"option": ...}']

prints what `collect(options)` returns, as JSON. The helpers a probe imports by name
(`import _nvidia_smi`) live in probes/helpers/FAMILY/, where the bundle reads them to ship them
flat (fleet/shipped.py); here those folders go on sys.path, after the probes' own folder, which
the probe's `__main__` block takes off again (probes/torch.py must never stand in for torch).
A probe that ships nothing also runs as `python3 probes/NAME.py`. Stdlib only, Python 3.8+.
"""

import os
import runpy
import sys
from typing import List

PROBES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def helper_folders(probes: str) -> List[str]:
    helpers = os.path.join(probes, "helpers")
    families = sorted(os.listdir(helpers)) if os.path.isdir(helpers) else []
    return [os.path.join(helpers, f) for f in families if os.path.isdir(os.path.join(helpers, f))]


def main(argv: List[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: python3 probes/runner/_by_hand.py NAME ['{options as JSON}']")
    probe = os.path.join(PROBES, argv[1] + ".py")
    sys.argv = [probe, *argv[2:]]
    sys.path[0:1] = [PROBES, *helper_folders(PROBES)]  # this folder out, the probes' in
    runpy.run_path(probe, run_name="__main__")


if __name__ == "__main__":
    sys.dont_write_bytecode = True  # nothing written beside the probes
    main(sys.argv)
