"""The HTML report at fleet scale: 1,000 synthetic hosts (bench/diff_scale.py's fleet: the real
2×H200 run, 2 odd hosts and 1 3× slow one), saved and loaded like a real run, then reported.

    python3 bench/report_scale.py [HOSTS]        # default 1000

Prints the time of the cross-host diff, of rendering and writing the page, of the whole
`fleet report RUN -o FILE` command (a fresh process: start-up, load, diff, render, write), and the
page's size. Budget (issue 18): ≤ 5 MB and ≤ 5 s at 1,000 hosts. Wall and CPU seconds both: on a
shared 2-core machine the wall time says as much about the neighbours as about fleet.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from diff_scale import synthetic_document  # noqa: E402

from fleet.analysis.across_hosts.diff import compare_hosts  # noqa: E402
from fleet.analysis.facts import declared_facts  # noqa: E402
from fleet.models import Run  # noqa: E402
from fleet.render.html.page import Report, write_html  # noqa: E402
from fleet.store import read_run_file as load_run  # noqa: E402
from fleet.store import save_run  # noqa: E402


def timed(label: str, action):
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    print(
        f"{label:42s} {time.perf_counter() - wall:6.2f} s wall {time.process_time() - cpu:6.2f} s CPU"
    )
    return result


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        saved = save_run(Run.from_dict(synthetic_document(count)), Path(tmp))
        run = load_run(saved)
        diff = timed(
            f"cross-host diff of {count} hosts",
            lambda: compare_hosts(run.hosts.values(), declared_facts()),
        )
        page = Path(tmp) / "report.html"
        timed("render and write the page", lambda: write_html(Report(run, diff, exit_code=0), page))
        print(f"{'page size':42s} {page.stat().st_size / 1e6:6.2f} MB")
        started = time.perf_counter()
        command = [sys.executable, "-m", "fleet", "report", str(saved), "-o", str(page)]
        subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall, cpu = time.perf_counter() - started, child.ru_utime + child.ru_stime
        print(
            f"{'fleet report RUN -o FILE (whole command)':42s} {wall:6.2f} s wall {cpu:6.2f} s CPU"
        )
        print(f"{'load average (1 min) of this machine':42s} {os.getloadavg()[0]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
