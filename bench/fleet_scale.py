"""fleet's own commands at the size of the largest clusters (issues 25, 40): 1,000 to 20,000 hosts,
from a plain `--json` document and from a saved run, on two kinds of data.

    python3 bench/fleet_scale.py                       # 1000 5000 20000 hosts, best of 2 runs
    python3 bench/fleet_scale.py --repeat 1 1000 5000  # any sizes; one run each
    python3 bench/fleet_scale.py --keep /tmp/fs 20000  # keep (and reuse) the built runs there
    python3 bench/fleet_scale.py --only drift,check --kinds repeated --forms plain

The hosts are real captured hosts (tests/probes/golden/real_run/): the real 2× H200 run (every
probe, allreduce included), the 8-host mixed loopback run (2× H200 and 8× RTX PRO 6000 Blackwell,
one torch without sm_120, one NCCL_P2P_DISABLE=1) and the 8-host loopback run with two odd hosts,
in a cycle of 20 (4 real H200, 8 mixed, 8 loopback) to N hosts. Two kinds of data:

- `unique`: each host gets its own identity: hostname, GPU UUIDs and serials, and jittered
  allreduce timings, so the identity-bearing payloads (`system`, `gpu`, `allreduce`) are distinct
  per host, as on a real fleet, and the rest are shared.
- `repeated`: the captured hosts over and over, each payload equal to its source's (a few real
  hosts repeated); only the name, address and elapsed times are the host's own.

Two runs (OLD for drift, and RUN: RUN differs by new timings, a torch upgrade on one host in
1,000, one host gone and one new) are kept in both forms: `saved` by fleet's store (fleet/store.py
save_run: each distinct payload once) and `plain` as `fleet probe --json FILE` writes them (every
host's payloads in full).

Each command runs in a fresh process (`python -m fleet …`, output to a file as in a pipeline), so
each has its own peak RSS; the figures are its wall seconds, its CPU time (user + system, from
wait4) and its peak RSS (ru_maxrss): on a shared machine the wall time says as much about the
neighbours as about fleet. A child's ru_maxrss also counts the pages of the process it was forked
from, so this process stays small (it never imports fleet; the runs are built by `--build` in a
process of its own) and prints the floor: the peak RSS of a bare `python -c pass` started the
same way. `load` is `fleet.load_run(RUN)` alone; `keep` is what `fleet probe --json FILE` and
`--json -` do once the hosts are done, on the run as a probe holds it (every payload its own
object): save it, write the file and the indented document to stdout (plain form only). Target
(issue 40): at 20,000 hosts each command ≤ 15 s and ≤ 1.5 GB. Needs nothing beyond fleet itself.
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
REPEATED = CYCLE
KINDS = ("unique", "repeated")
FORMS = ("plain", "saved")
COMMANDS = ("load", "diff", "drift", "show", "check", "report", "keep")
TARGET_S, TARGET_MB = 15.0, 1500.0


def templates() -> dict[tuple[str, str], dict[str, Any]]:
    loaded = {name: json.loads((REAL_RUN / name).read_text()) for name, _ in set(CYCLE)}
    return {(name, host): loaded[name]["hosts"][host] for name, host in set(CYCLE)}


def fleet_document(count: int, seed: int, started: str, kind: str = "unique") -> dict[str, Any]:
    """`count` hosts made of the captured ones: `unique`, each with its own identity and
    timings; `repeated`, the 8 mixed hosts over and over, each payload equal to its source's
    (only the name, address and timings are the host's own)."""
    rng = random.Random(seed)
    sources = templates()
    cycle = CYCLE if kind == "unique" else REPEATED
    probes: set[str] = set()
    hosts: dict[str, Any] = {}
    for index in range(count):
        name = f"gpu-{index:05d}"
        host = copy.deepcopy(sources[cycle[index % len(cycle)]])
        host["address"] = f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"
        host["elapsed_s"] = round(host["elapsed_s"] * rng.uniform(0.8, 1.2), 3)
        for probe, result in host["probes"].items():
            probes.add(probe)
            result["elapsed_s"] = round(result["elapsed_s"] * rng.uniform(0.8, 1.2), 3)
            if kind == "unique":
                own_identity(probe, result["data"], name, index, seed, rng)
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


def own_identity(
    probe: str, data: dict[str, Any], name: str, index: int, seed: int, rng: random.Random
) -> None:
    """The host's own hostname, GPU UUIDs and serials, allreduce timings (`unique` hosts)."""
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


def build_runs(count: int, kind: str, folder: Path) -> dict[str, list[str]]:
    """OLD and RUN of `count` hosts of `kind` in both forms in `folder` (reused when already
    there), built in a process of their own: a child's peak RSS (ru_maxrss) counts the pages of
    the process it was forked from, so the process that measures the commands stays small."""
    marker = folder / "runs.json"
    if not marker.is_file():
        build = [sys.executable, __file__, "--build", str(count), kind, str(folder)]
        subprocess.run(build, check=True)
    forms: dict[str, list[str]] = json.loads(marker.read_text())
    return forms


def save_runs(count: int, kind: str, folder: Path) -> None:
    """Build OLD and RUN (`--build`, in its own process) and keep each in both forms: saved by
    fleet's store (each distinct payload once) and plain, as `fleet probe --json FILE` writes."""
    sys.path.insert(0, str(ROOT))
    from fleet.api.runs import keep_run
    from fleet.models import Run

    started = time.process_time()
    forms: dict[str, list[str]] = {form: [] for form in FORMS}
    for role, seed in (("old", 1), ("new", 2)):
        document = fleet_document(count + seed - 1, seed, f"2026-12-01T1{seed}:00:00.000Z", kind)
        if role == "new":
            hosts = document["hosts"]
            hosts.pop("gpu-00003")  # one host gone, the last one new
            for index, host in enumerate(hosts.values()):
                if index % 1000 == 7 and "torch" in host["probes"]:
                    host["probes"]["torch"]["data"]["version"] = "2.11.1+cu130"
        run = Run.from_dict(document)
        del document
        (folder / "saved").mkdir(parents=True, exist_ok=True)
        plain = folder / f"{role}.json"
        kept = keep_run(run, runs_dir=folder / "saved", json_path=plain)
        forms["saved"].append(str(kept.saved))
        forms["plain"].append(str(plain))
        del run, kept
    (folder / "runs.json").write_text(json.dumps(forms))
    sizes = ", ".join(
        f"{form} {Path(forms[form][1]).stat().st_size / 1e6:.0f} MB" for form in FORMS
    )
    print(
        f"# {count} {kind} hosts: built in {time.process_time() - started:.1f} s CPU; RUN {sizes}",
        flush=True,
    )


# `keep`: what `fleet probe --json` does once the hosts are done, on the run as a probe holds it
# (every host's payloads its own objects, as each host's line decoded them): save it, write
# --json FILE, and the --json - document to stdout.
KEEP = """
import json, sys
from fleet.api.runs import keep_run
from fleet.cli.probing import say_kept
from fleet.models import Run
with open(sys.argv[1], encoding="utf-8") as handle:
    run = Run.from_dict(json.load(handle))
kept = keep_run(run, runs_dir=sys.argv[2], json_path=sys.argv[2] + "/run.json")
say_kept(kept.errors, kept.run, "-")
"""


def command_line(command: str, old: str, new: str, out: Path) -> list[str]:
    fleet = [sys.executable, "-m", "fleet"]
    return {
        "load": [sys.executable, "-c", "import sys, fleet; fleet.load_run(sys.argv[1])", new],
        "diff": [*fleet, "diff", new, "--json", "-"],
        "drift": [*fleet, "diff", old, new],
        "show": [*fleet, "show", new],
        "check": [*fleet, "check", "--run", new],
        "report": [*fleet, "report", new, "-o", str(out / "report.html")],
        "keep": [sys.executable, "-c", KEEP, new, str(out)],
    }[command]


def measure(argv: list[str], out: Path) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one fresh process, and its
    exit code."""
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    with (out / "stdout").open("wb") as stdout, (out / "stderr").open("wb") as stderr:
        began = time.perf_counter()
        child = subprocess.Popen(argv, cwd=ROOT, stdout=stdout, stderr=stderr, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, child.returncode


Row = tuple[str, str, int, str, float, float, float, int]  # kind, form, hosts, command, …


def measure_command(command: str, paths: list[str], repeat: int, tmp: Path) -> list[float]:
    """Best wall and CPU of `repeat` runs, the highest peak RSS, the last exit code."""
    scratch = tmp / "out"
    scratch.mkdir(exist_ok=True)
    runs = [measure(command_line(command, *paths, scratch), tmp) for _ in range(repeat)]
    code = runs[-1][3]
    if code not in (0, 16, 32):  # 16: drift found, 32: a rule failed
        sys.stderr.write((tmp / "stderr").read_text()[-2000:])
        print(f"# {command} exited {code}", flush=True)
    return [min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs), code]


def table(rows: list[Row], sizes: list[int]) -> None:
    print("\n| data | form | command | " + " | ".join(f"{c:,} hosts" for c in sizes) + " |")
    print("| --- | --- | --- |" + " --- |" * len(sizes))
    for kind, form, command in dict.fromkeys((r[0], r[1], r[3]) for r in rows):
        cells = [
            f"{wall:.2f} s, {rss:.0f} MB"
            for k, f, _, c, wall, _, rss, _ in rows
            if (k, f, c) == (kind, form, command)
        ]
        print(f"| {kind} | {form} | {command} | " + " | ".join(cells) + " |")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--build"]:
        save_runs(int(argv[1]), argv[2], Path(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=2, help="runs of each command (best of)")
    parser.add_argument("--keep", type=Path, help="folder to keep and reuse the built runs in")
    parser.add_argument("--only", default=",".join(COMMANDS), help="commands, comma-separated")
    parser.add_argument("--kinds", default=",".join(KINDS), help="data: unique, repeated")
    parser.add_argument("--forms", default=",".join(FORMS), help="documents: plain, saved")
    args = parser.parse_args(argv)
    commands, kinds, forms = (a.split(",") for a in (args.only, args.kinds, args.forms))
    for given, known in ((commands, COMMANDS), (kinds, KINDS), (forms, FORMS)):
        if set(given) - set(known):
            parser.error(f"unknown {sorted(set(given) - set(known))}; known: {', '.join(known)}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        base = args.keep or tmp
        floor = measure([sys.executable, "-c", "pass"], tmp)
        print(f"# floor: python -c pass, {floor[1]:.2f} s CPU, {floor[2]:.0f} MB", flush=True)
        rows: list[Row] = []
        for kind in kinds:
            for count in args.sizes:
                paths = build_runs(count, kind, base / f"{kind}{count}")
                for form in forms:
                    for command in commands:
                        if command == "keep" and form == "saved":
                            continue  # the run as probed: read from the plain form only
                        wall, cpu, rss, code = measure_command(
                            command, paths[form], args.repeat, tmp
                        )
                        over = count >= 20000 and (wall > TARGET_S or rss > TARGET_MB)
                        rows.append((kind, form, count, command, wall, cpu, rss, code))
                        print(
                            f"{kind:<8} {form:<5} {count:>6} {command:<6} {wall:7.2f} s wall "
                            f"{cpu:7.2f} s CPU {rss:6.0f} MB  exit {code}{'  OVER' if over else ''}",
                            flush=True,
                        )
        table(rows, args.sizes)
        print(f"\nload average (1 min) of this machine: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
