"""`fleet check` at fleet scale: the default pack judged on N hosts built from a real run.

    python3 bench/check_scale.py [HOSTS ...]        # default 1000 2000 4000

Each size repeats the eight hosts of the golden loopback run (tests/probes/golden/real_run/
loopback8_two_odd.json: gpu-01…06 alike, gpu-07 with another torch, gpu-08 with
NCCL_P2P_DISABLE=1) under unique names (gpu-00001 …), with their own hostname and address, so a
quarter of the hosts fail some rule and every failure has N/8 twins that failed alike: the case
where building the `{hosts}` of a fix once per host made the check quadratic (issue 25).
Times `fleet.api.check` (rules loaded and judged; the run already in memory) and prints one row
per size: seconds, milliseconds per host, the ratio to the size before it (linear: 2.0 for
twice the hosts), failed (rule × host) pairs and the peak RSS of the process so far.
Needs nothing beyond fleet itself.
"""

from __future__ import annotations

import copy
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fleet.api import check  # noqa: E402
from fleet.models import Run  # noqa: E402

REAL = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
SIZES = (1000, 2000, 4000)


def fleet_document(count: int) -> dict[str, Any]:
    """The golden run's hosts repeated to `count`, each with its own name, hostname and address."""
    real = json.loads(REAL.read_text())
    originals = list(real["hosts"].values())
    hosts = {}
    for index in range(count):
        name = f"gpu-{index + 1:05d}"
        host = copy.deepcopy(originals[index % len(originals)])
        host["address"] = f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"
        host["probes"]["system"]["data"]["hostname"] = name
        hosts[name] = host
    return {**real, "hosts": hosts}


def main(argv: list[str]) -> int:
    sizes = [int(arg) for arg in argv] or list(SIZES)
    print(f"{'hosts':>7} {'check s':>9} {'ms/host':>8} {'× prev':>7} {'failed':>7} {'peak RSS':>9}")
    previous: float | None = None
    for count in sizes:
        run = Run.from_dict(fleet_document(count))
        started = time.perf_counter()
        report = check(run)
        elapsed = time.perf_counter() - started
        failed = sum(len(r.failures) for r in report.results)
        ratio = f"{elapsed / previous:7.2f}" if previous else f"{'':>7}"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{count:>7} {elapsed:>9.2f} {1000 * elapsed / count:>8.2f} {ratio} "
            f"{failed:>7} {peak:>6.0f} MB",
            flush=True,
        )
        previous = elapsed
        del run, report
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
