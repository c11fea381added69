"""fleet fabric's exit bits for hosts left out of the test: one that could not run a rank sets 4;
a node Slurm reports drained or down (`unavailable`) is skipped too but sets no bit (README,
"Slurm": counted apart, no exit bit), as in `fleet probe`."""

from __future__ import annotations

from fleet.exits import EXIT_OK, EXIT_UNREACHED, exit_code, fabric_exit_code
from fleet.models import HostOutcome, HostStatus, Run

DRAINED = "gpu-05 not reached: Slurm reports gpu-05 drained: ECC errors on GPU1"


def fabric_run(statuses: dict[str, HostStatus], skipped: dict[str, str]) -> Run:
    hosts = {name: HostOutcome(name, status, name) for name, status in statuses.items()}
    return Run("0", "start", "end", "", hosts, fabric={"pairs": [], "skipped_hosts": skipped})


def test_a_drained_node_sets_no_bit() -> None:
    run = fabric_run({"gpu-01": "ok", "gpu-02": "ok", "gpu-05": "unavailable"}, {"gpu-05": DRAINED})
    assert fabric_exit_code(run) == exit_code(run) == EXIT_OK


def test_a_host_that_could_not_run_a_rank_still_sets_4() -> None:
    skipped = {"gpu-05": DRAINED, "gpu-03": "torch is not importable by python3"}
    statuses: dict[str, HostStatus] = {"gpu-01": "ok", "gpu-03": "partial", "gpu-05": "unavailable"}
    assert fabric_exit_code(fabric_run(statuses, skipped)) == EXIT_UNREACHED
