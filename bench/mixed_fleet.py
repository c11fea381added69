"""Issue 23's mixed fleet, for real: 8 loopback sshd hosts with fake GPU stacks (2× H200, and 8×
RTX PRO 6000 Blackwell with one host lacking sm_120 and one with NCCL_P2P_DISABLE=1), probed with
`COLUMNS=80 fleet probe --no-allreduce`; prints what the user sees and the "Done when" figures
(the README's mixed-fleet figure). Needs openssh-server and root, not pytest.

    python3 bench/mixed_fleet.py              # the output and its measurements
    python3 bench/mixed_fleet.py --record     # also (re)write the golden run document
                                              # tests/probes/golden/real_run/mixed8_loopback.json
    python3 bench/mixed_fleet.py --geforce [--record]   # issue 46's fleet: h03-h08 2× GeForce
                                              # RTX 5090 (GNS), hosts g01-g08,
                                              # recorded as geforce8_loopback.json
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.mixed_fleet import (  # noqa: E402
    GEFORCE8,
    MIXED8,
    NO_SM120,
    P2P_OFF,
    probe_mixed_fleet,
    start_mixed_fleet,
)
from tests.integration.sshd import SshdFarm, find_sshd  # noqa: E402

GOLDEN = ROOT / "tests" / "probes" / "golden" / "real_run"
FLEETS = {"mixed8": MIXED8, "geforce8": GEFORCE8}
WIDTH = 80


FIRST = 25  # issue 46: every problem host named in the first 25 lines
MOST = 60  # and at most 60 lines


def measure(stdout: str, odd: tuple[str, str] = (NO_SM120, P2P_OFF)) -> None:
    lines = stdout.splitlines()
    over = [line for line in lines if len(line) > WIDTH]
    print(f"lines printed: {len(lines)} (Done when: at most {MOST})")
    alone = all(len(line.split()) == 1 for line in over)
    print(f"lines over {WIDTH} columns: {len(over)}, each one name alone on its line: {alone}")
    for line in over:
        print(f"  {line}")
    for host, what in zip(odd, ("without sm_120", "with NCCL_P2P_DISABLE")):
        where = next((i + 1 for i, line in enumerate(lines[:FIRST]) if host in line), None)
        print(f"the host {what} ({host}) in the first {FIRST} lines: line {where}")


def main() -> int:
    sshd = find_sshd()
    assert sshd, "needs openssh-server"
    name = "geforce8" if "--geforce" in sys.argv[1:] else "mixed8"
    target = GOLDEN / f"{name}_loopback.json"
    with tempfile.TemporaryDirectory() as tmp:
        farm = SshdFarm(Path(tmp) / "farm", sshd)
        try:
            inventory = start_mixed_fleet(farm, Path(tmp), stacks=FLEETS[name])
            started = time.perf_counter()
            result = probe_mixed_fleet(Path(tmp), inventory)
            elapsed = time.perf_counter() - started
        finally:
            farm.stop()
        print(result.stdout, end="")
        print(result.stderr[-2000:], end="", file=sys.stderr)
        print(f"--- fleet probe: exit {result.returncode}, {elapsed:.1f} s")
        measure(result.stdout, (NO_SM120, P2P_OFF) if name == "mixed8" else ("g05", "g07"))
        if "--record" in sys.argv[1:]:
            shutil.copy(Path(tmp) / "run.json", target)
            document = json.loads(target.read_text())
            print(
                f"recorded {target.relative_to(ROOT)}:",
                {h: o["status"] for h, o in document["hosts"].items()},
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
