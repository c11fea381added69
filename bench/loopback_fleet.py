"""Time `fleet probe` against N real sshd hosts on loopback (the integration tests' farm).

    python3 bench/loopback_fleet.py [N ...]        # default: 8 32

Prints, per N: wall time of the whole command, and the controller's own CPU time (user+sys of the
`fleet` process, not of sshd or the remote interpreters). Probes: system,packages (cheap), so the
numbers are mostly connection, bundle and fan-out cost. Needs openssh-server and root (like CI).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.fleet_runs import ssh_host, write_inventory
from tests.integration.sshd import SshdFarm, find_sshd


def measure(farm: SshdFarm, count: int, workdir: Path) -> tuple[float, float, int]:
    names = [f"bench-{count}-{i}" for i in range(count)]
    for index, name in enumerate(names):
        farm.start(name, f"127.1.{count % 250}.{index + 1}")
    known = farm.known_hosts(workdir / f"known_{count}", names)
    inventory = write_inventory(
        workdir / f"inv_{count}.yaml", farm, {n: ssh_host(farm, n) for n in names}, known
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet",
            "probe",
            "-i",
            str(inventory),
            "-p",
            "system,packages",
            "--no-save",
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "XDG_STATE_HOME": str(workdir / "state")},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> int:
    counts = [int(a) for a in sys.argv[1:]] or [8, 32]
    sshd = find_sshd()
    if sshd is None:
        print("needs sshd: apt-get install -y openssh-server")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        farm = SshdFarm(Path(tmp) / "farm", sshd)
        try:
            for count in counts:
                wall, cpu, code = measure(farm, count, Path(tmp))
                print(
                    f"{count:4d} hosts: wall {wall:6.2f} s, controller CPU {cpu:6.2f} s "
                    f"({cpu / count * 1000:5.1f} ms/host), exit {code}"
                )
        finally:
            farm.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
