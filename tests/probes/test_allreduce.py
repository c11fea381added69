"""The `allreduce` probe: nccl-tests math, planning, options, environment policy, supervision,
skips against stubs and CPU torch, and a real gloo run on CPU."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

from fleet.execution.bundle import build_bundle
from fleet.transport.launch import LAUNCH_ARGS
from tests.probes import handrun
from tests.probes.handrun import helper_path, load_helper, load_probe
from tests.probes.ships import helpers_imported

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "probes" / "allreduce.py"
STUBS = REPO / "tests" / "fakes" / "stubs"
MiB = 1 << 20


probe = load_probe("allreduce")
# Its helpers, the same modules the probe imported.
CONFIG = load_helper("_allreduce_config")
ROWS = load_helper("_allreduce_rows")
RANKS = load_helper("_allreduce_ranks")
VARIANTS = load_helper("_allreduce_variants")
MATRIX = load_helper("_allreduce_matrix")


def run_by_hand(options=None, pythonpath=None, cwd=None):
    return handrun.run_by_hand("allreduce", options, pythonpath, cwd)


plan = probe.plan_functions()


# ------------------------------------------------------------------ its parts
def test_ships_its_worker_and_every_helper_it_imports():
    assert probe.SHIPS[0] == probe.WORKER_FILE == "_allreduce_worker.py"
    assert set(probe.SHIPS) == helpers_imported("allreduce") | {probe.WORKER_FILE}


def test_the_budgets_leave_the_runners_backstop_room():
    assert CONFIG.MAX_BUDGET_S == probe.TIMEOUT_S - 20


# ------------------------------------------------------------------ pure math
def test_bandwidths_follow_nccl_tests():
    algbw = ROWS.algbw_gbps(2_000_000_000, 2.0)
    assert algbw == 1.0
    assert ROWS.busbw_gbps(algbw, 2) == 1.0
    assert ROWS.busbw_gbps(algbw, 8) == 1.75
    assert ROWS.busbw_gbps(algbw, 4) == 1.5


def test_size_ladder_full_doubles_from_8_bytes_to_256_mib():
    sizes = ROWS.size_ladder(256 * MiB, quick=False)
    assert sizes[0] == 8
    assert sizes[-1] == 256 * MiB
    assert len(sizes) == 26
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


def test_size_ladder_quick_is_shorter_and_still_ends_at_max():
    assert ROWS.size_ladder(256 * MiB, quick=True) == [
        8,
        64,
        512,
        4096,
        32768,
        262144,
        2 * MiB,
        16 * MiB,
        128 * MiB,
        256 * MiB,
    ]
    assert ROWS.size_ladder(1000, quick=True) == [8, 64, 512, 1000]
    assert ROWS.size_ladder(8, quick=False) == [8]


def test_result_row_computes_bandwidth_from_the_time():
    row = ROWS.result_row(
        {
            "mode": "graph",
            "bytes": 256 * MiB,
            "seconds": 893.76e-6,
            "correct": True,
            "iterations": 20,
        },
        world_size=2,
    )
    assert row["latency_us"] == 893.76
    assert row["algbw_gbps"] == pytest.approx(300.35, abs=0.01)  # the H200 reference capture
    assert row["busbw_gbps"] == row["algbw_gbps"]
    row8 = ROWS.result_row({"mode": "eager", "bytes": 8, "seconds": 1e-3, "correct": True}, 8)
    assert row8["algbw_gbps"] == 8e-6  # significant digits, not decimals: tiny values survive
    assert row8["busbw_gbps"] == pytest.approx(8e-6 * 1.75)


@pytest.mark.parametrize(
    "record",
    [
        {"mode": "bogus", "bytes": 8, "seconds": 1.0},
        {"mode": "eager", "bytes": "8", "seconds": 1.0},
        {"mode": "eager", "bytes": 8, "seconds": 0},
        {"mode": "graph", "error": "capture failed"},
        {"started": True},
    ],
)
def test_result_row_rejects_malformed_records(record):
    assert ROWS.result_row(record, 2) is None


# ------------------------------------------------------------------ planning (runs in the workers)
@pytest.mark.parametrize(
    ("estimate", "budget", "expected"),
    [
        (1e-5, 1.0, 50),  # fast: capped at max
        (0.1, 1.0, 10),
        (1.0, 0.5, 2),  # slow: at least min
        (0.0, 1.0, 50),
    ],
)
def test_iterations_for(estimate, budget, expected):
    assert plan["iterations_for"](estimate, budget, 2, 50) == expected


@pytest.mark.parametrize(
    ("iterations", "expected"),
    [(50, (10, 5)), (20, (10, 2)), (7, (7, 1)), (1, (1, 1)), (500, (10, 5))],
)
def test_graph_plan(iterations, expected):
    assert plan["graph_plan"](iterations) == expected


# ------------------------------------------------------------------ options and environment
def test_option_defaults():
    nccl = probe.parse_options({})
    assert (
        nccl.enabled,
        nccl.backend,
        nccl.world_size,
        nccl.max_bytes,
        nccl.dtype,
        nccl.time_budget_s,
        nccl.env,
    ) == (True, "nccl", None, 256 * MiB, "bfloat16", 30.0, {})
    assert probe.parse_options({"backend": "gloo"}).max_bytes == 4 * MiB
    assert probe.parse_options({"backend": "gloo", "quick": True}).max_bytes == MiB


@pytest.mark.parametrize(
    ("options", "quoted"),
    [
        ({"backend": "mpi"}, "'mpi'"),
        ({"dtype": "int4"}, "'int4'"),
        ({"world_size": 1}, "1"),
        ({"world_size": True}, "True"),
        ({"max_bytes": 4}, "4"),
        ({"time_budget_s": 0}, "0"),
        ({"time_budget_s": 10_000}, "10000"),
        ({"env": {"HF_TOKEN": "x"}}, "HF_TOKEN"),
        ({"env": ["NCCL_ALGO"]}, "NCCL_ALGO"),
    ],
)
def test_bad_options_name_the_bad_value(options, quoted):
    with pytest.raises(ValueError, match=quoted):
        probe.parse_options(options)
    result = probe.collect(options)
    assert result["ok"] is False
    assert result["error"].startswith("invalid options")


def test_multicast_stays_off_in_every_rank_whatever_the_host_or_options_say():
    base = {"NCCL_NVLS_ENABLE": "1", "PATH": "/bin"}  # a host that would turn NVLS on
    requested = {
        "NCCL_NVLS_ENABLE": "1",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0",
        "NVSHMEM_DISABLE_NVLS": "0",
        "NCCL_ALGO": "Ring",
    }
    env, refused = probe.worker_environment(base, requested)
    assert refused == [
        "NCCL_NVLS_ENABLE",
        "NVSHMEM_DISABLE_NVLS",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    ]
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env["NCCL_ALGO"] == "Ring"
    assert env["PATH"] == "/bin"


def test_without_options_the_host_environment_gains_only_the_multicast_policy():
    base = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "NCCL_P2P_LEVEL": "NVL"}
    env, refused = probe.worker_environment(base, {})
    assert env == {**base, **CONFIG.FORCED_ENV}
    assert refused == []


def test_reported_environment_is_an_allow_list():
    env = {
        "NCCL_P2P_DISABLE": "1",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_TOKEN": "hf_CANARY",
        "AWS_SECRET_ACCESS_KEY": "x",
        "PATH": "/bin",
    }
    assert probe.reported_environment(env) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_P2P_DISABLE": "1",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
    }


def test_rank_environment_names_the_rank_and_no_port():
    env = RANKS.rank_environment({"A": "1"}, rank=1, world_size=4)
    assert env == {
        "A": "1",
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "4",
    }


def test_worker_config_leaves_room_before_the_hard_deadline():
    config = probe.parse_options({"time_budget_s": 30, "quick": True})
    cfg = probe.worker_config(config, started_wall=1000.0, world_size=2, rendezvous_file="/x/r")
    assert 1000.0 + 25 <= cfg["deadline"] < 1000.0 + 30
    assert cfg["graph"] is True
    assert cfg["max_iters"] == 20
    assert (
        probe.worker_config(probe.parse_options({"backend": "gloo"}), 0.0, 2, "/x/r")["graph"]
        is False
    )


# ------------------------------------------------------------------ supervision of workers
def sleeper(code):
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        start_new_session=True,
    )


def test_workers_are_killed_at_the_deadline():
    workers = probe.Workers([sleeper("import time; time.sleep(60)") for _ in range(2)])
    assert workers.wait(time.monotonic() + 0.5) == "deadline"
    workers.kill()
    assert [p.returncode for p in workers.procs] == [-signal.SIGKILL] * 2


def test_a_failed_rank_ends_the_wait_and_names_itself():
    workers = probe.Workers(
        [
            sleeper("import time; time.sleep(60)"),
            sleeper("import sys; sys.stderr.write('NCCL WARN boom\\n'); sys.exit(7)"),
        ]
    )
    assert workers.wait(time.monotonic() + 30) == "failed"
    workers.kill()
    assert workers.failure() == "rank 1 exited with code 7: NCCL WARN boom"


def test_rank_zero_records_are_picked_out_of_other_output():
    marker = repr(RANKS.MARKER)
    code = (
        f"print('NCCL INFO chatter'); print({marker} + '{{\"mode\": \"eager\"}}'); "
        f"print({marker} + 'not json')"
    )
    workers = probe.Workers([sleeper(code)])
    assert workers.wait(time.monotonic() + 30) == "finished"
    workers.kill()
    assert workers.records == [{"mode": "eager"}]


# ------------------------------------------------------------------ skips
def test_disabled():
    result = probe.collect({"enabled": False})
    assert result == {
        "ok": False,
        "data": {"backend": "nccl", "dtype": "bfloat16", "results": []},
        "error": "allreduce disabled by options",
    }


def test_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    result = probe.collect({})
    assert result["ok"] is False
    assert result["error"].startswith("torch not importable")


@pytest.mark.parametrize("stub", ["torch_sm120_noarch", "torch_sm120_ok", "torch_h200"])
@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_stub_torch_skips_cleanly_without_starting_workers(stub, backend):
    result = run_by_hand({"backend": backend}, pythonpath=STUBS / stub)
    assert result["ok"] is False
    assert "init_process_group" in result["error"]
    assert result["data"]["results"] == []


@pytest.mark.torch
def test_cpu_torch_with_nccl_skips_for_lack_of_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this test describes a machine without CUDA")
    result = run_by_hand({})
    assert result["ok"] is False
    assert result["error"].startswith("CUDA not available")


# ------------------------------------------------------------------ a real run, gloo on CPU
def check_rows(data, world_size):
    assert data["world_size"] == world_size
    assert data["backend"] == "gloo"
    assert data["results"]
    assert data["all_correct"] is True
    for row in data["results"]:
        assert row["mode"] == "eager"
        assert row["correct"] is True
        assert 0 < row["latency_us_min"] <= row["latency_us"] <= row["latency_us_max"]
        assert row["repetitions"] == RANKS.EAGER_REPETITIONS
        assert row["algbw_gbps"] == pytest.approx(
            row["bytes"] / (row["latency_us"] * 1e-6) / 1e9, rel=1e-4
        )
        assert row["busbw_gbps"] == pytest.approx(
            row["algbw_gbps"] * 2 * (world_size - 1) / world_size, rel=1e-4
        )


@pytest.mark.torch
def test_gloo_world_size_2_quick(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # host policy: must reach the workers unchanged
    result = probe.collect(
        {"backend": "gloo", "quick": True, "env": {"NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": "WARN"}}
    )
    assert result["ok"] is True, result["error"]
    data = result["data"]
    check_rows(data, 2)
    assert [row["bytes"] for row in data["results"]] == data["sizes_planned"][
        : len(data["results"])
    ]
    assert data["env_refused"] == ["NCCL_NVLS_ENABLE"]
    assert data["env_overrides"]["NCCL_NVLS_ENABLE"] == "0"
    assert data["env_overrides"]["NCCL_DEBUG"] == "WARN"
    assert data["nccl_version"] is None


@pytest.mark.torch
def test_an_unwritable_temp_folder_is_a_clear_error_not_a_crash(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    missing = tmp_path / "no-such-dir"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    result = probe.collect({"backend": "gloo", "quick": True})
    assert result["ok"] is False
    assert result["error"].startswith(f"cannot create the ranks' rendezvous folder in {missing}")
    assert result["data"]["world_size"] == 2


@pytest.mark.torch
def test_gloo_world_size_3_bus_bandwidth_leaves_no_rendezvous_behind(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = probe.collect({"backend": "gloo", "quick": True, "world_size": 3, "max_bytes": 4096})
    assert result["ok"] is True, result["error"]
    check_rows(result["data"], 3)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the worker ships in the bundle
@pytest.mark.torch
def test_the_worker_travels_in_the_bundle_and_runs_from_it(tmp_path):
    """Run as a transport runs it, from an empty folder: the worker text can only come from the
    bundle (the probe's fallback, the file beside it, does not exist there), and nothing is left."""
    pytest.importorskip("torch")
    bundle = build_bundle(["allreduce"])
    shipped = dict(bundle.probes["allreduce"].files)
    assert list(shipped) == list(probe.SHIPS)  # the worker and the helpers, as they are here
    for name, text in shipped.items():
        assert text == helper_path(name).read_text(encoding="utf-8"), name  # type: ignore[union-attr]
    options = {"allreduce": {"backend": "gloo", "quick": True, "max_bytes": 64}}
    done = subprocess.run(
        [sys.executable, *LAUNCH_ARGS],
        input=bundle.script(options, deadline_s=100, parallel=4),
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    report = next(line for line in lines if line.get("type") == "probe")
    assert report["status"] == "ok", report
    assert [row["bytes"] for row in report["data"]["results"]] == [8, 64]
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ latency statistics (issue 13)
class SlowStart:
    """torch.distributed whose first `slow` measured allreduces each take `delay_s` longer: what
    lazy set-up and idle clocks do to the first calls of a real run."""

    def __init__(self, dist, slow, delay_s):
        self.dist, self.slow, self.delay_s = dist, slow, delay_s
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.dist, name)

    def all_reduce(self, tensor, **kwargs):
        if "op" not in kwargs:  # the measured calls; the ranks' agreements pass op=MAX
            self.calls += 1
            if self.calls <= self.slow:
                time.sleep(self.delay_s)
        return self.dist.all_reduce(tensor, **kwargs)


@pytest.fixture
def gloo_alone(monkeypatch, tmp_path):
    """A real gloo process group of one rank, in this process."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    yield torch, dist
    dist.destroy_process_group()


@pytest.mark.torch
def test_eager_latency_is_the_median_of_repetitions_after_the_warm_up(gloo_alone):
    torch, dist = gloo_alone
    cfg = {"backend": "gloo", "dtype": "float32", "graph": False, "warmup": 5, "warmup_s": 0.0}
    cfg.update(repetitions=7, min_iters=2, max_iters=10)
    slow = SlowStart(dist, slow=cfg["warmup"], delay_s=0.05)
    bench = plan["Bench"](cfg, torch, slow)
    record = bench.eager(torch.ones(2), budget_s=0.05)
    assert slow.calls > cfg["warmup"]
    assert record["repetitions"] == 7
    assert record["iterations"] % 7 == 0
    assert record["seconds_min"] <= record["seconds"] <= record["seconds_max"]
    assert record["seconds_max"] < 0.05  # the slow warm-up calls are in no sample
    assert record["correct"] is True


def test_one_slow_repetition_moves_the_median_not():
    samples = [1e-5] * 6 + [5e-3]
    assert plan["spread"](samples) == {"seconds": 1e-5, "seconds_min": 1e-5, "seconds_max": 5e-3}
    assert plan["spread"]([3.0, 1.0, 2.0, 4.0])["seconds"] == 2.5


def test_rows_carry_min_and_max_of_the_repetitions():
    row = ROWS.result_row(
        {"mode": "eager", "bytes": 8, "seconds": 27e-6, "seconds_min": 25e-6},
        world_size=2,
    )
    assert (row["latency_us_min"], row["latency_us"], row["latency_us_max"]) == (25, 27, 27)


# ------------------------------------------------------------------ the matrix (issue 19)
READY = "import sys, time\nprint(%r, flush=True)\nsys.stdin.readline()\n" % (
    RANKS.MARKER + '{"ready": true}'
)
HANG = READY + "time.sleep(600)\n"  # takes its turn, never ends
REFUSE = READY + (
    "sys.stderr.write('NCCL WARN no algorithm/protocol available for AllReduce\\n')\nsys.exit(1)\n"
)


def matrix_config(**matrix):
    return probe.parse_options({"backend": "gloo", "quick": True, "matrix": matrix or True})


def on_two_ranks(scratch, env=None):
    """Two ranks meeting in `scratch`; a variant without a source runs the probe's worker."""
    return MATRIX.Ranks(dict(env or {}), 2, str(scratch), probe.worker_source)


def alive(workers):
    return [p.pid for p in workers.procs if p.poll() is None]


def test_matrix_options():
    assert probe.parse_options({}).matrix is None
    matrix = probe.parse_options({"matrix": True}).matrix
    assert matrix.algos == ("Ring", "Tree", "CollnetDirect", "CollnetChain", "PAT")
    assert matrix.protos == ("LL", "LL128", "Simple")
    assert matrix.budget_s == 60
    assert probe.parse_options({"matrix": {"algos": ["Ring"], "budget_s": 20}}).matrix.algos == (
        "Ring",
    )


@pytest.mark.parametrize(
    ("matrix", "quoted"),
    [
        ({"algos": ["NVLS"]}, "NVLink multicast"),
        ({"algos": ["NVLSTree"]}, "NVLink multicast"),
        ({"protos": ["LL256"]}, "'LL256'"),
        ({"budget": 3}, "budget_s"),
        ("yes", "'yes'"),
        ({"budget_s": 160}, "at most 180"),
    ],
)
def test_bad_matrix_options_name_the_bad_value(matrix, quoted):
    with pytest.raises(ValueError, match=quoted):
        probe.parse_options({"matrix": matrix})


def test_nccl_variants_are_algo_by_proto_and_never_multicast():
    variants, absent = VARIANTS.nccl_variants(
        probe.parse_options({"matrix": True}).matrix, (2, 21, 5)
    )
    names = [v.name for v in variants]
    assert names[0] == "nccl:default"
    assert variants[0].env == {}
    assert len(names) == 1 + 4 * 3  # PAT is absent before NCCL 2.23
    assert sorted(absent) == ["nccl:PAT/LL", "nccl:PAT/LL128", "nccl:PAT/Simple"]
    assert "2.21.5" in absent["nccl:PAT/LL"]
    assert {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"} in [v.env for v in variants]
    assert not [n for n in names if "NVLS" in n]
    newer, none_absent = VARIANTS.nccl_variants(
        probe.parse_options({"matrix": True}).matrix, (2, 28)
    )
    assert len(newer) == 16
    assert none_absent == {}


@pytest.mark.torch
def test_symm_mem_variants_are_the_one_and_two_shot_kernels_never_multimem():
    torch = pytest.importorskip("torch")
    variants, absent = VARIANTS.symm_mem_variants(torch)
    found = sorted([v.name for v in variants] + list(absent))
    assert found == ["symm_mem:one_shot_all_reduce", "symm_mem:two_shot_all_reduce_"]
    assert all("multimem" not in v.op for v in variants)


def test_a_symm_mem_kernel_this_torch_lacks_is_absent_with_the_reason(monkeypatch):
    # symm_mem_variants imports the symmetric-memory module by name: a stand-in, not the real
    # torch's (absent, or broken by a first import under warnings-as-errors, in this process)
    module = types.ModuleType("torch.distributed._symmetric_memory")
    module.empty = module.rendezvous = lambda *args, **kwargs: None
    monkeypatch.setitem(sys.modules, module.__name__, module)

    class Ops:
        symm_mem = type("Namespace", (), {"one_shot_all_reduce": object()})()

    torch = type("Torch", (), {"ops": Ops, "__version__": "2.5.0"})
    variants, absent = VARIANTS.symm_mem_variants(torch)
    assert [v.name for v in variants] == ["symm_mem:one_shot_all_reduce"]
    assert absent == {
        "symm_mem:two_shot_all_reduce_": "torch 2.5.0 has no torch.ops.symm_mem.two_shot_all_reduce_"
    }


@pytest.mark.torch
def test_matrix_runs_each_variant_alone_and_records_refusals_and_hangs(tmp_path):
    """Real gloo ranks for the good variant; a refused one, a hanging one killed at its own
    deadline, and one the worker itself refuses (symmetric memory on CPU) — each costs itself."""
    pytest.importorskip("torch")
    config = matrix_config(budget_s=60, variant_timeout_s=8)
    variants = [
        CONFIG.Variant("gloo:default", "dist", {}),
        CONFIG.Variant("refused", "dist", {"NCCL_ALGO": "Tree"}, source=REFUSE),
        CONFIG.Variant("hangs", "dist", {}, source=HANG),
        CONFIG.Variant("symm_mem:one_shot_all_reduce", "symm_mem:one_shot_all_reduce", {}),
    ]
    results = MATRIX.run_matrix(config, variants, on_two_ranks(tmp_path, {"PATH": "/usr/bin:/bin"}))
    good, refused, hangs, symm = (results[v.name] for v in variants)
    assert good["status"] == "ok"
    assert good["error"] is None
    assert [(r["mode"], r["bytes"]) for r in good["rows"]] == [
        ("eager", 8),
        ("eager", 65536),
        ("eager", MiB),
    ]
    assert all(r["correct"] and r["latency_us_min"] <= r["latency_us"] for r in good["rows"])
    assert refused["status"] == "failed"
    assert refused["failed_at"] == ["failed"]
    # both ranks refuse; the first to exit is named (either, as the two race)
    assert re.match(r"rank [01] exited with code 1: NCCL WARN no algorithm", refused["error"])
    assert refused["env"] == {"NCCL_ALGO": "Tree"}
    assert hangs["status"] == "timeout"
    assert hangs["failed_at"] == ["timeout"]
    assert hangs["error"] == "killed at its 8s deadline, before its first result"
    assert hangs["elapsed_s"] >= 7.5  # ended at its deadline, not before (how late: bench/)
    assert symm["status"] == "failed"
    assert "symmetric memory needs CUDA (backend gloo)" in symm["error"]


def test_the_budget_stops_the_matrix_honestly(tmp_path):
    config = matrix_config(budget_s=5, variant_timeout_s=3)
    variants = [CONFIG.Variant(f"hang-{i}", "dist", {}, source=HANG) for i in range(4)]
    results = MATRIX.run_matrix(config, variants, on_two_ranks(tmp_path))
    statuses = [results[v.name]["status"] for v in variants]
    assert statuses == ["timeout", "stopped", "not_run", "not_run"]
    assert results["hang-1"]["error"].startswith("stopped: the matrix's 5s budget ran out")
    assert results["hang-2"]["error"] == "not run: the matrix's budget ran out first"


def test_a_killed_variant_leaves_no_rank_behind(tmp_path):
    config = matrix_config(budget_s=10, variant_timeout_s=3)
    launched = MATRIX.launch(
        config, CONFIG.Variant("h", "dist", {}, source=HANG), 0, on_two_ranks(tmp_path)
    )
    MATRIX.run_variant(launched, config.matrix, time.monotonic() + 10, 2)
    assert alive(launched.workers) == []
    assert [p.returncode for p in launched.workers.procs] == [-signal.SIGKILL] * 2


def test_every_rank_of_every_variant_has_multicast_off(tmp_path):
    dump = READY + "import json, os\nprint(%r + json.dumps(dict(os.environ)))\n"
    config = matrix_config(budget_s=20, variant_timeout_s=5)
    variant = CONFIG.Variant("env", "dist", {"NCCL_ALGO": "Ring"}, source=dump % RANKS.MARKER)
    launched = MATRIX.launch(config, variant, 0, on_two_ranks(tmp_path, {"NCCL_NVLS_ENABLE": "1"}))
    MATRIX.run_variant(launched, config.matrix, time.monotonic() + 20, 2)
    env = launched.workers.records[-1]
    assert {k: env[k] for k in CONFIG.FORCED_ENV} == CONFIG.FORCED_ENV
    assert env["NCCL_ALGO"] == "Ring"
    assert env["RANK"] == "0"


# Rows as a 2×H200 run records them (latency in µs); winners are per mode and size.
RECORDED = {
    "nccl:default": {
        "rows": [
            {"mode": "eager", "bytes": 8, "latency_us": 27.0, "correct": True},
            {"mode": "graph", "bytes": 8, "latency_us": 9.1, "correct": True},
            {"mode": "eager", "bytes": 256 * MiB, "latency_us": 893.0, "correct": True},
        ]
    },
    "nccl:Ring/LL": {
        "rows": [
            {"mode": "eager", "bytes": 8, "latency_us": 25.0, "correct": True},
            {"mode": "graph", "bytes": 8, "latency_us": 9.1, "correct": True},
            {"mode": "eager", "bytes": 256 * MiB, "latency_us": 2900.0, "correct": True},
        ]
    },
    "nccl:Tree/LL": {
        "rows": [
            {"mode": "eager", "bytes": 8, "latency_us": 12.0, "correct": False},  # fast and wrong
        ]
    },
    "symm_mem:one_shot_all_reduce": {
        "rows": [
            {"mode": "graph", "bytes": 8, "latency_us": 6.5, "correct": True},
        ]
    },
    "nccl:CollnetDirect/LL": {"status": "failed", "rows": []},
}


def test_winners_per_mode_and_size_and_each_rows_ratio():
    variants = json.loads(json.dumps(RECORDED))
    winners = VARIANTS.matrix_winners(variants)
    assert winners == {
        "eager": {"8 B": "nccl:Ring/LL", "256 MiB": "nccl:default"},
        "graph": {"8 B": "symm_mem:one_shot_all_reduce"},
    }
    ratios = {name: [r["ratio"] for r in v["rows"]] for name, v in variants.items()}
    assert ratios["nccl:default"] == [1.08, 1.4, 1.0]
    assert ratios["nccl:Ring/LL"] == [1.0, 1.4, 3.247]
    assert ratios["nccl:Tree/LL"] == [0.48]  # measured, but never a winner: its sum was wrong


def test_a_tie_goes_to_the_first_name_so_winners_do_not_flap():
    rows = {"mode": "graph", "bytes": 8, "latency_us": 9.0, "correct": True}
    variants = {"nccl:b": {"rows": [dict(rows)]}, "nccl:a": {"rows": [dict(rows)]}}
    assert VARIANTS.matrix_winners(variants) == {"graph": {"8 B": "nccl:a"}}


@pytest.mark.torch
def test_gloo_matrix_through_collect_keeps_the_whole_matrix_in_the_document():
    pytest.importorskip("torch")
    options = {"backend": "gloo", "quick": True, "max_bytes": 4096, "time_budget_s": 5}
    result = probe.collect({**options, "matrix": {"budget_s": 40}})
    matrix = result["data"]["matrix"]
    assert matrix["sizes"] == [8]
    assert matrix["stopped_early"] is False
    assert matrix["winners"] == {"eager": {"8 B": "gloo:default"}}
    assert matrix["variants"]["gloo:default"]["rows"][0]["ratio"] == 1.0


def stand_in_torch(available: bool, count: int) -> types.SimpleNamespace:
    """What readiness() asks of torch: its version and CUDA's answers."""
    cuda = types.SimpleNamespace(is_available=lambda: available, device_count=lambda: count)
    return types.SimpleNamespace(__version__="2.11.0+cu130", cuda=cuda)


@pytest.mark.parametrize(
    ("available", "count", "not_applicable"),
    [(True, 1, True), (True, 0, True), (False, 0, False), (True, 2, None)],
)
def test_one_gpu_is_not_applicable_a_missing_cuda_is_not(
    monkeypatch: pytest.MonkeyPatch, available: bool, count: int, not_applicable: bool | None
) -> None:
    """Issue 45: with fewer than two GPUs the probe cannot apply (its rules are n/a); torch
    without CUDA on a GPU host is a problem to report, not a property of the host."""
    ready = load_helper("_allreduce_ready")
    monkeypatch.setitem(sys.modules, "torch", stand_in_torch(available, count))
    facts: dict = {"torch_version": "2.11.0+cu130"}
    reason = ready._gpu_problem(sys.modules["torch"], CONFIG.parse_options({}), facts)
    assert facts.get(ready.NOT_APPLICABLE) is (not_applicable or None)
    assert (reason is None) is (not_applicable is None)


@pytest.mark.parametrize(
    ("gpus", "visible", "installed", "answered"),
    [
        (1, None, "2.11.0+cu130", True),  # the lent H200: answered without torch
        (2, None, "2.11.0+cu130", False),  # two GPUs: torch counts them and the probe runs
        (0, None, "2.11.0+cu130", False),  # driver without a GPU: torch says why
        (1, "0", "2.11.0+cu130", False),  # CUDA_VISIBLE_DEVICES may differ: torch decides
        (1, None, None, False),  # no torch installed: torch's import says so
    ],
)
def test_one_gpu_is_answered_without_importing_torch(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    gpus: int,
    visible: str | None,
    installed: str | None,
    answered: bool,
) -> None:
    """Issue 45: on a one-GPU host the default run's allreduce cost 3.5 s of importing torch and
    starting CUDA just to count one GPU; the driver's own list answers it."""
    ready = load_helper("_allreduce_ready")
    for index in range(gpus):
        (tmp_path / f"0000:{index:02x}:00.0").mkdir()
    monkeypatch.setattr(ready, "DRIVER_GPUS", str(tmp_path))
    monkeypatch.setattr(ready, "_installed_torch_version", lambda: installed)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch here would fail the test
    found = ready.one_gpu_without_torch()
    assert (found is not None) is answered
    if found is not None:
        reason, facts = found
        assert reason == "only 1 GPU: an allreduce needs 2 or more"
        assert facts == {"torch_version": installed, "device_count": 1, ready.NOT_APPLICABLE: True}
        assert ready.readiness(CONFIG.parse_options({})) == found
