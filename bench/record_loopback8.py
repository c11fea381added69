"""Record the golden run `tests/probes/golden/real_run/loopback8_two_odd.json`: 8 real sshd hosts on
loopback with fake GPU stacks, 6 alike and 2 odd (one torch where only `_SymmetricMemory` exists,
one with NCCL_P2P_DISABLE=1). The diff tests read it back.   python3 bench/record_loopback8.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.fleet_runs import run_fleet, ssh_host, write_inventory  # noqa: E402
from tests.integration.gpu_stacks import host_env  # noqa: E402
from tests.integration.sshd import SshdFarm, find_sshd  # noqa: E402

TARGET = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
ODD = {"gpu-07": ("torch_h200", {}), "gpu-08": ("torch_h200_symm", {"NCCL_P2P_DISABLE": "1"})}


def main() -> int:
    sshd = find_sshd()
    assert sshd, "needs openssh-server"
    with tempfile.TemporaryDirectory() as tmp:
        farm = SshdFarm(Path(tmp) / "farm", sshd)
        try:
            names = [f"gpu-0{i}" for i in range(1, 9)]
            for index, name in enumerate(names):
                stub, extra = ODD.get(name, ("torch_h200_symm", {}))
                farm.start(name, f"127.0.8.{index + 1}", host_env("h200x2_nvlink", stub, extra))
            inventory = write_inventory(
                Path(tmp) / "inv.yaml",
                farm,
                {n: ssh_host(farm, n) for n in names},
                farm.known_hosts(Path(tmp) / "known", names),
            )
            result = run_fleet(Path(tmp), "probe", "-i", str(inventory), "--no-allreduce")
            print(result.stdout[-3000:])
            shutil.copy(Path(tmp) / "run.json", TARGET)
        finally:
            farm.stop()
    document = json.loads(TARGET.read_text())
    print({h: o["status"] for h, o in document["hosts"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
