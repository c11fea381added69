"""Wall time when hosts are busy on their own side: instant probes against probes 10 s slower.

    python3 bench/fanout_wall.py --hosts 300              # the issue-16 target: ratio ≤ 1.2
    python3 bench/fanout_wall.py --hosts 1000 --sshd 20   # memory permitting
    python3 bench/fanout_wall.py --hosts 1000 --bastion   # every host behind one jump host

The same N loopback hosts (K real sshd, side_by_side's fleet) probed twice with `fleet probe`'s
default settings (no --concurrency; `-t 600` so the loopback's own CPU queue, 2 cores for N remote
interpreters, is not what ends a host): once with the real interpreter, once through a shim that
sleeps 10 s and then execs it (like tests/fakes/bin/slow-python). A fan-out that holds a slot for
a host's whole run pays the 10 s once per round of slots; one that bounds only handshakes pays it
about once. Prints wall, controller CPU (the fleet process tree), peak RSS and
ratio = wall(slow) / (wall(instant) + 10 s). `--bastion` adds one more sshd as a jump host for
every host: N channels on one bastion connection.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import side_by_side as sbs

EXTRA_S = 10
PROBES = ",".join(sbs.PROBES)


def write_inventory(fleet: sbs.Fleet, path: Path, python: str, bastion: bool) -> Path:
    hosts: dict[str, dict[str, object]] = {
        t.name: {"address": t.address, "port": t.port} for t in fleet.targets
    }
    defaults: dict[str, object] = {
        "user": getpass.getuser(),
        "identity_file": str(fleet.key),
        "known_hosts": str(fleet.known_hosts),
        "python": python,
        "connect_timeout": 60,
    }
    if bastion:
        jump = fleet.farm.hosts["jump"]
        hosts["jump"] = {"address": jump.address, "port": jump.port, "jump": None}
        defaults["jump"] = "jump"
    # block YAML: fleet tells its own format from Ansible's by the top-level keys it sees
    path.write_text(yaml.safe_dump({"defaults": defaults, "hosts": hosts}, sort_keys=False))
    return path


def slow_shim(workdir: Path) -> Path:
    shim = workdir / "slow-python"
    shim.write_text(f'#!/bin/sh\nsleep {EXTRA_S}\nexec {sbs.PYTHON} "$@"\n')
    shim.chmod(0o755)
    return shim


def measure(fleet: sbs.Fleet, label: str, python: str, args: argparse.Namespace) -> sbs.Measure:
    rundir = fleet.workdir / label
    rundir.mkdir()
    inventory = write_inventory(fleet, rundir / "inventory.yaml", python, args.bastion)
    command = [
        sbs.PYTHON, "-m", "fleet", "probe", "-i", str(inventory), "-p", PROBES, "-l", "h*",
        "--no-save", "--json", str(rundir / "run.json"), "-t", "600",
    ]  # fmt: skip
    wall, usage, code = sbs.run_measured(
        command, fleet, args.hosts * 2.0 + 300, env=sbs.fleet_env(fleet, rundir),
        log=rundir / "output.log",
    )  # fmt: skip
    valid, note = sbs.fleet_count(fleet, rundir)
    if valid != len(fleet.targets) and not note:
        note = (rundir / "output.log").read_text(errors="replace")[-300:]
    return sbs.Measure(wall, usage.cpu_s, usage.maxrss_kib, code, valid, note)


def start(workdir: Path, args: argparse.Namespace) -> sbs.Fleet:
    fleet = sbs.start_fleet(workdir, args.hosts, args.sshd)
    if args.bastion:
        try:
            jump = fleet.farm.start("jump", "127.77.9.1", MaxSessions="2", LogLevel="INFO")
        except BaseException:
            fleet.farm.stop()
            raise
        with fleet.known_hosts.open("a") as known:
            known.write(jump.known_hosts_line() + "\n")
    return fleet


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--sshd", type=int, default=20)
    parser.add_argument("--bastion", action="store_true", help="every host behind one jump host")
    args = parser.parse_args(argv)
    sbs.become_subreaper()
    with tempfile.TemporaryDirectory(prefix="fanout_wall_") as tmp:
        workdir = Path(tmp)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{args.hosts} hosts on {args.sshd} sshd, load average {load}", flush=True)
        fleet = start(workdir, args)
        try:
            runs = {
                "instant": measure(fleet, "instant", sbs.PYTHON, args),
                "slow": measure(fleet, "slow", str(slow_shim(workdir)), args),
            }
        finally:
            fleet.farm.stop()
    for label, m in runs.items():
        print(
            f"  {label:8} wall {m.wall_s:7.2f} s  CPU {m.cpu_s:6.2f} s "
            f"({m.cpu_s / args.hosts * 1000:5.1f} ms/host)  peak RSS {m.maxrss_kib / 1024:5.0f} MB"
            f"  ok {m.valid}/{args.hosts}  exit {m.returncode} {m.note}"
        )
    ratio = runs["slow"].wall_s / (runs["instant"].wall_s + EXTRA_S)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"ratio wall(slow) / (wall(instant) + {EXTRA_S} s) = {ratio:.2f}  (load average {load})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
