"""fleet's own CPU behind `--slurm` at any N, without a cluster: srun's output replayed.

    python3 bench/slurm_fleet_side.py [N ...] [--rounds R] [--spread S]   # default: 1024 4096

bench/slurm_vs_ssh.py measures the whole controller (fleet + srun) against SSH on a real Slurm
cluster, but one 2-core machine runs 1,024 slurmd at most. This bench measures the part that is
fleet's own (demultiplexing srun's labelled output, decoding, outcomes, the report) at the sizes of
the largest clusters: `sinfo` and `srun` are stand-ins first on PATH. The stand-in srun takes its
stdin (the compressed bundle) to the end, then writes what one real node wrote through a real srun
(srun_node_capture.txt, recorded from bench/slurm_vs_ssh.py's cluster: start mark, hello, the
`system` probe, done, exit marks) for every node of --nodelist, nodes interleaved, in 50 batches
spread over S seconds. fleet runs in a child process; its CPU (user+sys, without the stand-in's)
is printed per N, the median of R rounds, and per node.

Not a substitute for the real step (no srun, no slurmstepd, nothing slow or lost): a check that
fleet's side stays linear in nodes and cheap per node.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# fleet in a child that says its children's CPU (the stand-ins'): fleet's own is the rest
from bench.slurm_vs_ssh import SPLIT_RUNNER, timed  # noqa: E402

CAPTURE = Path(__file__).resolve().parent / "srun_node_capture.txt"
BATCHES = 50

FAKE_SINFO = """#!/bin/sh
i=1
while [ "$i" -le "$REPLAY_NODES" ]; do printf 'n%05d|idle|127.0.0.1|none\\n' "$i"; i=$((i+1)); done
"""

FAKE_SRUN = """#!{python}
import os, sys, time
from ClusterShell.NodeSet import NodeSet

nodelist = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--nodelist="))
names = list(NodeSet(nodelist))
sys.stdin.buffer.read()
stdout, stderr = [], []
for line in open(os.environ["REPLAY_CAPTURE"], "rb").read().splitlines():
    stream, payload = line.split(b" ", 1)
    (stdout if stream == b"out" else stderr).append(payload)
width, batches = len(str(len(names) - 1)), {batches}
per = -(-len(names) // batches)
pause = float(os.environ["REPLAY_SPREAD_S"]) / batches / len(stdout)


def labelled(index, payload):
    if payload.startswith(b"\\x1dstart"):
        payload = b"\\x1dstart %s 1 0" % names[index].encode()
    return b"%*d: %s\\n" % (width, index, payload)


for batch in range(batches):
    tasks = range(batch * per, min(len(names), (batch + 1) * per))
    for step, payload in enumerate(stdout):
        sys.stdout.buffer.write(b"".join(labelled(i, payload) for i in tasks))
        sys.stdout.buffer.flush()
        if step == len(stdout) - 1:
            sys.stderr.buffer.write(b"".join(labelled(i, p) for i in tasks for p in stderr))
            sys.stderr.buffer.flush()
        time.sleep(pause)
"""


def stand_ins(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sinfo").write_text(FAKE_SINFO)
    (folder / "srun").write_text(FAKE_SRUN.format(python=sys.executable, batches=BATCHES))
    for name in ("sinfo", "srun"):
        (folder / name).chmod(0o755)
    return folder


def fleet_cpu(nodes: int, spread_s: float, bin_dir: Path, state: Path) -> tuple[float, str]:
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": str(state),
        "REPLAY_NODES": str(nodes),
        "REPLAY_CAPTURE": str(CAPTURE),
        "REPLAY_SPREAD_S": str(spread_s),
    }
    argv = [sys.executable, "-c", SPLIT_RUNNER, "probe", "-p", "system", "--no-save"]
    run = timed([*argv, "-t", "600", "--slurm", "partition=gpu"], env)
    if run.children is None:
        raise SystemExit(f"fleet failed at {nodes} nodes: {run.summary}")
    return run.cpu - run.children, run.summary.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nodes", nargs="*", type=int, default=[1024, 4096])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spread", type=float, default=8.0, help="seconds the replay takes (8)")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "fleet", quiet=1)  # as `pip install` leaves an installed fleet
    with tempfile.TemporaryDirectory(prefix="fleet-bench-replay-") as work:
        bin_dir = stand_ins(Path(work) / "bin")
        print(
            f"fleet's own CPU behind --slurm, srun replayed over {args.spread:g} s, median of "
            f"{args.rounds}:"
        )
        for nodes in args.nodes:
            runs = [
                fleet_cpu(nodes, args.spread, bin_dir, Path(work) / "state")
                for _ in range(args.rounds)
            ]
            cpu = statistics.median(c for c, _ in runs)
            print(
                f"  N={nodes:>6}: {cpu:6.2f} s = {cpu / nodes * 1000:5.2f} ms/node"
                f"   (each: {', '.join(f'{c:.2f}' for c, _ in runs)} s; {runs[-1][1]})"
            )


if __name__ == "__main__":
    main()
