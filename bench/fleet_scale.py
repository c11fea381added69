"""fleet's own commands at the size of the largest clusters (issue 25): 1,000 to 20,000 hosts.

    python3 bench/fleet_scale.py                       # 1000 5000 20000 hosts, each command once
    python3 bench/fleet_scale.py --repeat 2 1000 5000  # any sizes; best CPU of 2 runs
    python3 bench/fleet_scale.py --keep /tmp/fs 20000  # keep (and reuse) the saved runs there
    python3 bench/fleet_scale.py --only drift,check    # some commands only

The hosts are real captured hosts (tests/probes/golden/real_run/): the real 2× H200 run (every
probe, allreduce included), the 8-host mixed loopback run (2× H200 and 8× RTX PRO 6000 Blackwell,
one torch without sm_120, one NCCL_P2P_DISABLE=1) and the 8-host loopback run with two odd hosts,
repeated in a cycle of 20 (4 real H200, 8 mixed, 8 loopback) to N hosts. Each host gets its own
identity: name, address, hostname, GPU UUIDs and serials, and jittered timings (the host's and
each probe's elapsed_s, every allreduce row's latency and busbw), so the identity-bearing payloads
(`system`, `gpu`, `allreduce`) are distinct per host, as on a real fleet, and the rest are shared.
The two runs (OLD for drift, and RUN) are saved with fleet's own store (fleet/store.py save_run:
each distinct payload once); RUN differs from OLD by new jitter, a torch upgrade on one host in
1,000, one host gone and one new.

Each command runs in a fresh process (`python -m fleet …`, output to a file as in a pipeline), so
each has its own peak RSS; the figures are that process's CPU time (user + system, from wait4)
and its peak RSS (ru_maxrss): the machine is shared, so wall time says as much about the
neighbours. A child's ru_maxrss also counts the pages of the process it was forked from, so this
process stays small (it never imports fleet; the runs are built by `--build` in a process of its
own) and prints the floor: the peak RSS of a bare `python -c pass` started the same way. `load` is `fleet.load_run(RUN)` alone. Target (issue 25): at 20,000 hosts each
command ≤ 15 s and ≤ 1.5 GB. Needs nothing beyond fleet itself.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

REAL_RUN = ROOT / "tests" / "probes" / "golden" / "real_run"
SIZES = (1000, 5000, 20000)
# slot in a cycle of 20 → (file, host): 4 real H200 hosts, the mixed 8, the loopback 8
CYCLE = (
    [("h200x2_run.json", "local")] * 4
    + [("mixed8_loopback.json", f"h0{i}") for i in range(1, 9)]
    + [("loopback8_two_odd.json", f"gpu-0{i}") for i in range(1, 9)]
)
COMMANDS = ("load", "diff", "drift", "show", "check", "report")
TARGET_S, TARGET_MB = 15.0, 1500.0


def templates() -> dict[tuple[str, str], dict[str, Any]]:
    loaded = {name: json.loads((REAL_RUN / name).read_text()) for name, _ in set(CYCLE)}
    return {(name, host): loaded[name]["hosts"][host] for name, host in set(CYCLE)}


def fleet_document(count: int, seed: int, started: str) -> dict[str, Any]:
    """`count` hosts made of the captured ones, each with its own identity and timings."""
    rng = random.Random(seed)
    sources = templates()
    probes: set[str] = set()
    hosts: dict[str, Any] = {}
    for index in range(count):
        name = f"gpu-{index:05d}"
        host = copy.deepcopy(sources[CYCLE[index % len(CYCLE)]])
        host["address"] = f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"
        host["elapsed_s"] = round(host["elapsed_s"] * rng.uniform(0.8, 1.2), 3)
        for probe, result in host["probes"].items():
            probes.add(probe)
            result["elapsed_s"] = round(result["elapsed_s"] * rng.uniform(0.8, 1.2), 3)
            data = result["data"]
            if probe == "system":
                data["hostname"] = name
            elif probe == "gpu":
                for gpu in data.get("gpus") or []:
                    gpu["uuid"] = f"GPU-{seed:02x}{index:06x}-{gpu['index']:02d}-4a1e-9c3b"
                    gpu["serial"] = f"{1650000000000 + index * 16 + gpu['index']}"
            elif probe == "allreduce":
                data["elapsed_s"] = round(data["elapsed_s"] * rng.uniform(0.9, 1.1), 3)
                for row in data.get("results") or []:
                    jitter = rng.uniform(0.95, 1.05)
                    row["latency_us"] = round(row["latency_us"] * jitter, 4)
                    row["busbw_gbps"] = row["busbw_gbps"] / jitter
                    row["algbw_gbps"] = row["algbw_gbps"] / jitter
        hosts[name] = host
    return {
        "schema": "fleet.run/2",
        "fleet_version": "bench",
        "started": started,
        "finished": started,
        "bundle_sha256": "0" * 64,
        "inventory": "bench/fleet_scale.yaml",
        "probes": sorted(probes),
        "interrupted": False,
        "hosts": hosts,
        "transport": "ssh",
    }


def build_runs(count: int, folder: Path) -> tuple[Path, Path]:
    """OLD and RUN of `count` hosts saved in `folder` (reused when already there), built in a
    process of their own: a child's peak RSS (ru_maxrss) counts the pages of the process it was
    forked from, so the process that measures the commands stays small."""
    marker = folder / "runs.json"
    if not marker.is_file():
        build = [sys.executable, __file__, "--build", str(count), str(folder)]
        subprocess.run(build, check=True)
    old, new = json.loads(marker.read_text())
    return Path(old), Path(new)


def save_runs(count: int, folder: Path) -> None:
    """Build and save OLD and RUN (`--build`, in its own process)."""
    sys.path.insert(0, str(ROOT))
    from fleet.models import Run
    from fleet.store import save_run

    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "runs.json"
    started = time.process_time()
    old_doc = fleet_document(count, seed=1, started="2026-12-01T10:00:00.000Z")
    old = save_run(Run.from_dict(old_doc), folder)
    del old_doc
    new_doc = fleet_document(count + 1, seed=2, started="2026-12-01T11:00:00.000Z")
    hosts = new_doc["hosts"]
    hosts.pop("gpu-00003")  # one host gone, the last one new
    for index, host in enumerate(hosts.values()):
        if index % 1000 == 7 and "torch" in host["probes"]:
            host["probes"]["torch"]["data"]["version"] = "2.11.1+cu130"
    new = save_run(Run.from_dict(new_doc), folder)
    del new_doc, hosts
    marker.write_text(json.dumps([str(old), str(new)]))
    size = new.stat().st_size / 1e6
    print(
        f"# {count} hosts: saved in {time.process_time() - started:.1f} s CPU, "
        f"RUN file {size:.1f} MB",
        flush=True,
    )


def command_line(command: str, old: Path, new: Path, out: Path) -> list[str]:
    fleet = [sys.executable, "-m", "fleet"]
    return {
        "load": [sys.executable, "-c", "import sys, fleet; fleet.load_run(sys.argv[1])", str(new)],
        "diff": [*fleet, "diff", str(new), "--json", "-"],
        "drift": [*fleet, "diff", str(old), str(new)],
        "show": [*fleet, "show", str(new)],
        "check": [*fleet, "check", "--run", str(new)],
        "report": [*fleet, "report", str(new), "-o", str(out / "report.html")],
    }[command]


def measure(argv: list[str], out: Path) -> tuple[float, float, int]:
    """CPU seconds (user + system) and peak RSS (MB) of one fresh process, and its exit code."""
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    with (out / "stdout").open("wb") as stdout, (out / "stderr").open("wb") as stderr:
        child = subprocess.Popen(argv, cwd=ROOT, stdout=stdout, stderr=stderr, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, child.returncode


def main(argv: list[str]) -> int:
    if argv[:1] == ["--build"]:
        save_runs(int(argv[1]), Path(argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (best CPU)")
    parser.add_argument("--keep", type=Path, help="folder to keep and reuse the saved runs in")
    parser.add_argument("--only", default=",".join(COMMANDS), help="commands, comma-separated")
    args = parser.parse_args(argv)
    commands = [c for c in args.only.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        parser.error(f"unknown commands {sorted(unknown)}; known: {', '.join(COMMANDS)}")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        floor = measure([sys.executable, "-c", "pass"], Path(tmp))
        print(f"# floor: python -c pass, {floor[0]:.2f} s CPU, {floor[1]:.0f} MB", flush=True)
        rows = []
        for count in args.sizes:
            old, new = build_runs(count, base / f"hosts{count}")
            for command in commands:
                runs = [
                    measure(command_line(command, old, new, Path(tmp)), Path(tmp))
                    for _ in range(args.repeat)
                ]
                cpu = min(r[0] for r in runs)
                rss = max(r[1] for r in runs)
                code = runs[-1][2]
                if code not in (0, 16, 32):  # 16: drift found, 32: a rule failed
                    sys.stderr.write((Path(tmp) / "stderr").read_text()[-2000:])
                    print(f"# {command} at {count} hosts exited {code}", flush=True)
                over = "  OVER" if count >= 20000 and (cpu > TARGET_S or rss > TARGET_MB) else ""
                rows.append((count, command, cpu, rss, code))
                print(
                    f"{count:>7} {command:<7} {cpu:8.2f} s CPU {rss:8.0f} MB  exit {code}{over}",
                    flush=True,
                )
        print()
        print("| command | " + " | ".join(f"{c:,} hosts" for c in args.sizes) + " |")
        print("| --- |" + " --- |" * len(args.sizes))
        for command in commands:
            cells = [f"{cpu:.2f} s, {rss:.0f} MB" for c, k, cpu, rss, _ in rows if k == command]
            print(f"| {command} | " + " | ".join(cells) + " |")
        print(f"\nload average (1 min) of this machine: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
