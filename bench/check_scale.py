"""`fleet check` at fleet scale: the default pack judged on N hosts built from a real run.

    python3 bench/check_scale.py [--own-keys] [HOSTS ...]        # default 1000 2000 4000

Each size repeats the eight hosts of the golden loopback run (tests/probes/golden/real_run/
loopback8_two_odd.json: gpu-01…06 alike, gpu-07 with another torch, gpu-08 with
NCCL_P2P_DISABLE=1) under unique names (gpu-00001 …), with their own hostname and address: one
host in eight fails two rules of the pack, each failure with N/8 twins that failed alike, and one
of those rules names them all in its fix (`{hosts}`): the case where folding the names once per
failing host made the check quadratic (issue 25).

Times `fleet.api.check` (rules loaded and judged; the run already in memory) and prints one row
per size: wall and CPU seconds (this process's CPU: steadier on a shared machine), CPU ms per
host, the CPU ratio to the size before it (linear: 2.0 for twice the hosts), how many host names
ClusterShell parsed to fold them, failed (rule × host) pairs and the process's peak RSS so far.

`--own-keys`: each host's NCCL environment also sets a variable no other host sets
(NCCL_TAG_<n>), so the pack's `uniform_keys:` rule over the other NCCL_* settings sees N keys,
each set on one host: judging each host against every key of the cohort was quadratic too.
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

from ClusterShell.NodeSet import ParsingEngine  # noqa: E402

from fleet.api import check  # noqa: E402
from fleet.models import Run  # noqa: E402

REAL = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
SIZES = (1000, 2000, 4000)


def fleet_document(count: int, own_keys: bool = False) -> dict[str, Any]:
    """The golden run's hosts repeated to `count`, each with its own name, hostname and address
    (and with `own_keys`, an NCCL variable of its own)."""
    real = json.loads(REAL.read_text())
    originals = list(real["hosts"].values())
    hosts = {}
    for index in range(count):
        name = f"gpu-{index + 1:05d}"
        host = copy.deepcopy(originals[index % len(originals)])
        host["address"] = f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"
        host["probes"]["system"]["data"]["hostname"] = name
        if own_keys:
            host["probes"]["nccl"]["data"]["env"][f"NCCL_TAG_{index}"] = "1"
        hosts[name] = host
    return {**real, "hosts": hosts}


def counting_parses() -> list[int]:
    """Count ClusterShell's parses of one name from now on (the cost of folding host names)."""
    counter = [0]
    parse = ParsingEngine.parse_string

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return parse(self, *args, **kwargs)

    ParsingEngine.parse_string = counted  # type: ignore[method-assign]
    return counter


def main(argv: list[str]) -> int:
    own_keys = "--own-keys" in argv
    sizes = [int(arg) for arg in argv if arg != "--own-keys"] or list(SIZES)
    parses = counting_parses()
    print(
        f"{'hosts':>7} {'wall s':>7} {'CPU s':>7} {'ms/host':>8} {'× prev':>7} {'name parses':>12} "
        f"{'failed':>7} {'peak RSS':>9}"
    )
    previous: float | None = None
    for count in sizes:
        run = Run.from_dict(fleet_document(count, own_keys))
        parses[0] = 0
        started, cpu_started = time.perf_counter(), time.process_time()
        report = check(run)
        wall = time.perf_counter() - started
        elapsed = time.process_time() - cpu_started
        failed = sum(len(r.failures) for r in report.results)
        ratio = f"{elapsed / previous:7.2f}" if previous else f"{'':>7}"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{count:>7} {wall:>7.2f} {elapsed:>7.2f} {1000 * elapsed / count:>8.2f} {ratio} "
            f"{parses[0]:>12,} "
            f"{failed:>7} {peak:>6.0f} MB",
            flush=True,
        )
        previous = elapsed
        del run, report
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
