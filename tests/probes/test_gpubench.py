"""The gpubench probe: its pure parts (options, the pair schedule, phase budgets, nvidia-smi rows,
readings under load, matching torch's GPUs to nvidia-smi's), the worker's arithmetic, and whole
runs against a fake torch whose GPUs take simulated time (tests/fakes/stubs/torch_gpubench) with
a fake nvidia-smi (tests/fakes/gpubench_bin): every GPU and pair measured, one GPU, a GPU that
hangs (killed at the deadline, the probe stops early and says so, no process left). Without
torch, and with the CPU build of torch, the probe reports `absent`."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.execution.bundle import build_bundle
from fleet.units.gpubench import facts as scoring
from tests.probes.handrun import REPO, STUBS, helper_path, load_helper, load_probe, run_by_hand

probe = load_probe("gpubench")
# The helpers the probe ships, where its pure parts live (the same modules the probe imports).
plan = load_helper("_gpubench_plan")
procs = load_helper("_gpubench_procs")
results = load_helper("_gpubench_results")
sampling = load_helper("_gpubench_sampler")
nvidia_smi = load_helper("_nvidia_smi")
pcie = load_helper("_pcie")
worker = probe.plan_functions()
FAKE_TORCH = STUBS / "torch_gpubench"
FAKE_SMI_DIR = REPO / "tests" / "fakes" / "gpubench_bin"


def fake_run(
    machine: dict[str, Any], options: dict[str, Any] | None = None, smi: bool = True
) -> dict[str, Any]:
    """The probe by hand on the fake machine (its nvidia-smi first on PATH, or none at all)."""
    path = f"{FAKE_SMI_DIR}{os.pathsep}{os.environ['PATH']}" if smi else "/nonexistent"
    env = {"FLEET_FAKE_GPUBENCH": json.dumps(machine), "PATH": path}
    return run_by_hand("gpubench", {"quick": True, **(options or {})}, FAKE_TORCH, env=env)


def leftover_workers() -> list[str]:
    """Processes whose command line carries the worker's marker: none may outlive the probe."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if procs.MARKER.strip().encode() in cmdline:  # in each worker's config
            found.append(entry.name)
    return found


# ------------------------------------------------------------------------------ options


def test_option_defaults() -> None:
    config = probe.parse_options({})
    assert config.time_budget_s == 30
    assert config.dtypes == ("bfloat16", "float16", "float8_e4m3fn")
    assert config.shapes == ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192))
    assert config.pair_rounds is True
    assert probe.parse_options({"quick": True}).shapes == ((8192, 8192, 8192),)


@pytest.mark.parametrize(
    ("options", "quoted"),
    [
        ({"time_budget_s": 1}, "time_budget_s"),
        ({"dtypes": ["int8"]}, "dtypes"),
        ({"shapes": [[8192, 8192]]}, "shapes"),
        ({"tolerance": 2}, "tolerance"),
        ({"typo": 1}, "'typo'"),
    ],
)
def test_bad_options_name_the_bad_value(options: dict[str, Any], quoted: str) -> None:
    with pytest.raises(ValueError, match=quoted):
        probe.parse_options(options)
    result = probe.collect(options)
    assert result["ok"] is False
    assert result["error"].startswith("invalid options")


# ------------------------------------------------------------------------------ planning


@pytest.mark.parametrize("count", range(1, 10))
def test_round_robin_pairs_every_gpu_once_in_disjoint_rounds(count: int) -> None:
    rounds = plan.round_robin(count)
    pairs = [pair for r in rounds for pair in r]
    assert sorted(pairs) == [(a, b) for a in range(count) for b in range(a + 1, count)]
    for r in rounds:
        used = [g for pair in r for g in pair]
        assert len(used) == len(set(used)), f"a GPU twice in one round: {r}"
    assert len(rounds) == (0 if count < 2 else count - 1 if count % 2 == 0 else count)


def test_eight_gpus_make_seven_rounds_of_four_pairs_or_28_alone() -> None:
    assert [len(r) for r in plan.pair_schedule(8, True)] == [4] * 7
    assert [len(r) for r in plan.pair_schedule(8, False)] == [1] * 28


def test_one_gpu_plans_no_pair_phases() -> None:
    config = probe.parse_options({})
    assert not [p for p in plan.plan_phases(config, 1) if p.startswith("pairs:")]
    assert plan.plan_phases(config, 2)[-3:] == list(plan.PAIR_PHASES)


def test_phase_budget_is_the_measure_time_until_the_budget_runs_short() -> None:
    assert plan.phase_budget(100.0, [3.0, 1.0, 2.0], 0.25) == pytest.approx(0.75)
    # 2 s left for 9 units of work and set-up: the first phase (3 of them) gets a third of 2 s
    assert plan.phase_budget(2.0, [3.0, 1.0, 2.0], 0.25) == pytest.approx(2.0 * 3 / 9)
    assert plan.phase_budget(0.0, [3.0], 0.25) == 0.0


# ------------------------------------------------------------------------------ nvidia-smi

SMI_LINE = (
    "0, GPU-8c2f0d1e-aaaa-bbbb-cccc-0123456789ab, 00000000:18:00.0, 4, 5, 16, 16, "
    "0x0000000000000044, 1755, 1980, 67, 689.51, 80123, 100"
)


def test_smi_rows_are_parsed_and_na_is_null() -> None:
    text = (
        SMI_LINE
        + "\n1, GPU-x, 00000000:19:00.0, [N/A], 5, 16, 16, [N/A], 1980, 1980, 40, [N/A], 5, 0\n"
    )
    rows = nvidia_smi.parse_sample_rows(text + "garbage line\n")
    assert len(rows) == 2
    assert rows[0]["pcie_gen"] == 4
    assert rows[0]["pcie_gen_max"] == 5
    assert rows[0]["clock_events"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert rows[0]["power_w"] == pytest.approx(689.51)
    assert rows[1]["pcie_gen"] is None
    assert rows[1]["clock_events"] is None
    assert rows[1]["power_w"] is None


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        ("0x0000000000000000", []),
        ("0x0000000000000088", ["hw_slowdown", "hw_power_brake_slowdown"]),
        ("0x0000000000001001", ["gpu_idle", "unknown_0x1000"]),
        ("[N/A]", None),
        ("not hex", None),
    ],
)
def test_clock_event_reasons_decode(mask: str, names: list[str] | None) -> None:
    assert nvidia_smi.decode_clock_event_reasons(mask) == names


def test_torch_and_nvidia_smi_name_the_same_gpu_by_uuid_or_bus() -> None:
    rows = [
        {"index": 0, "uuid": "GPU-aa-01", "pci_bus_id": "00000000:18:00.0"},
        {"index": 1, "uuid": "GPU-bb-02", "pci_bus_id": "00000000:2A:00.0"},
    ]
    by_uuid = {0: {"uuid": "BB-02", "pci": None}}  # torch spells it without GPU-
    assert results.match_rows(by_uuid, rows) == {0: rows[1]}
    by_bus = {0: {"uuid": None, "pci": [0, 0x2A, 0]}, 1: {"uuid": None, "pci": [0, 0x18, 0]}}
    assert results.match_rows(by_bus, rows) == {0: rows[1], 1: rows[0]}
    unknown = {0: {"cuda_index": 0}, 1: {"cuda_index": 1}}  # old torch: PCI order, same count
    assert results.match_rows(unknown, rows) == {0: rows[0], 1: rows[1]}
    assert results.match_rows({0: {"cuda_index": 0}}, rows) == {}  # CUDA_VISIBLE_DEVICES subset


def test_bus_ids_compare_across_spellings() -> None:
    assert pcie.bus_key("00000000:18:00.0") == pcie.bus_key("0000:18:00.0") == (0, 0x18, 0)
    assert pcie.bus_key([0, 24, 0]) == (0, 24, 0)
    assert pcie.bus_key("nonsense") is None


def test_cpulist() -> None:
    assert pcie.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]


# ------------------------------------------------------------------------------ under load


def row(gen: int | None = 5, width: int = 16, reasons: list[str] | None = None) -> dict[str, Any]:
    return {
        "index": 0,
        "pcie_gen": gen,
        "pcie_gen_max": 5,
        "pcie_width": width,
        "pcie_width_max": 16,
        "clock_events": ["sw_power_cap"] if reasons is None else reasons,
        "sm_mhz": 1900,
    }


WINDOWS = [("matmul:bfloat16", 1.0, 2.0), ("h2d", 2.0, 3.0)]


def test_a_link_that_saves_power_between_bursts_but_reaches_max_under_host_copies_is_fine() -> None:
    samples = [(0.5, [row(gen=1)]), (1.5, [row(gen=2)]), (2.5, [row(gen=5)])]
    load = sampling.load_summary(samples, WINDOWS, 0)
    assert load["pcie_below_max"] is False
    assert load["pcie_read_during"] == "host copies"
    assert load["samples"] == 2  # the idle sample before the load does not count


def test_a_link_trained_down_never_reaches_max() -> None:
    samples = [(1.5, [row(gen=4)]), (2.5, [row(gen=4)])]
    load = sampling.load_summary(samples, WINDOWS, 0)
    assert load["pcie_below_max"] is True
    assert (load["pcie_gen"], load["pcie_gen_max"]) == (4, 5)
    narrow = sampling.load_summary([(2.5, [row(width=8)])], WINDOWS, 0)
    assert narrow["pcie_below_max"] is True


def test_hw_slowdown_under_load_is_a_throttle_sw_power_cap_is_not() -> None:
    calm = sampling.load_summary([(1.5, [row(reasons=["sw_power_cap"])])], WINDOWS, 0)
    assert calm["hw_throttle"] is False
    hot = [(1.5, [row(reasons=["hw_thermal_slowdown"])]), (2.5, [row()])]
    load = sampling.load_summary(hot, WINDOWS, 0)
    assert load["hw_throttle"] is True
    assert load["hw_throttle_samples"] == 1
    assert load["clock_events"] == ["hw_thermal_slowdown", "sw_power_cap"]


def test_readings_not_taken_are_null_never_fine() -> None:
    assert sampling.load_summary([], WINDOWS, 0)["pcie_below_max"] is None
    assert sampling.load_summary([(1.5, [row()])], WINDOWS, None)["hw_throttle"] is None
    unread = sampling.load_summary([(1.5, [row(gen=None, reasons=[])])], WINDOWS, 0)
    assert unread["pcie_below_max"] is None
    no_reasons = dict(row(), clock_events=None)
    assert sampling.load_summary([(1.5, [no_reasons])], WINDOWS, 0)["hw_throttle"] is None


def test_the_sampler_falls_back_to_the_pre_r535_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_FAKE_GPUBENCH", json.dumps({"gpus": 1, "legacy_reasons": True}))
    sampler = sampling.Sampler(str(FAKE_SMI_DIR / "nvidia-smi"), 0.05)
    rows = sampler.query()
    assert rows is not None
    assert rows[0]["clock_events"] == ["sw_power_cap"]
    assert sampler.reasons_field == nvidia_smi.LEGACY_REASONS_FIELD
    sampler.start()
    sampler.stop()
    assert sampler.error is None
    assert sampling.Sampler(None, 0.2).record()["available"] is False


# ------------------------------------------------------------------------------ the worker


def test_worker_arithmetic() -> None:
    assert worker["matmul_flops"]((8192, 8192, 8192)) == 2 * 8192**3
    assert worker["rate"](2 * 8192**3, 1.633e-3, 1e12) == pytest.approx(673.3, rel=1e-3)
    assert worker["rate"](1, 0) is None
    assert worker["iterations_for"](0.01, 0.05, 2, 100) == 5
    assert worker["iterations_for"](0.0, 1.0, 2, 100) == 100
    assert worker["spread"]([3.0, 1.0, 2.0, 10.0]) == {
        "seconds": 2.5,
        "seconds_min": 1.0,
        "seconds_max": 10.0,
    }
    assert worker["gate_seconds"](10) < worker["gate_seconds"](1000) <= 0.25


def test_the_best_shape_is_kept_and_a_refused_one_is_said() -> None:
    best = worker["best_shape"](
        {
            "4096x4096x4096": {"tflops": 610.0},
            "8192x8192x8192": {"tflops": 673.0},
            "x": {"error": "E"},
        }
    )
    assert (best["tflops"], best["best_shape"]) == (673.0, "8192x8192x8192")
    assert worker["best_shape"]({"x": {"error": "E: refused"}})["error"] == "E: refused"


def test_fp8_needs_capability_8_9_and_scaled_mm() -> None:
    class Torch:
        __version__ = "2.13"
        float8_e4m3fn = object()
        _scaled_mm = object()

    assert "8.9 and later" in worker["fp8_problem"](Torch, (8, 0))
    assert worker["fp8_problem"](Torch, (9, 0)) is None
    del Torch._scaled_mm
    assert "_scaled_mm" in worker["fp8_problem"](Torch, (9, 0))


def test_the_worker_and_the_helpers_travel_in_the_bundle() -> None:
    bundle = build_bundle(["gpubench"])
    files = bundle.probes["gpubench"].files
    assert set(files) == set(probe.SHIPS)
    assert {"_gpubench_worker.py", "_nvidia_smi.py", "_pcie.py", "_host_io.py"} <= set(files)
    for name, text in files.items():
        assert text == helper_path(name).read_text()  # type: ignore[union-attr]


def test_the_worker_imports_only_the_worker_io_helper() -> None:
    """It runs as `python -c <program>` in a child process, where the runner serves no helper:
    the program carries _worker_io, the one helper it may import (with the standard library, and
    torch inside its functions)."""
    tree = ast.parse((REPO / "probes" / "helpers" / "gpubench" / "_gpubench_worker.py").read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name.startswith("_")} == {"__future__", "_worker_io"}


def test_health_and_gpubench_ship_one_nvidia_smi_helper() -> None:
    bundle = build_bundle(["health", "gpubench"])
    shipped = bundle.shipped_modules()
    assert (
        shipped["_nvidia_smi.py"]
        == (REPO / "probes" / "helpers" / "shared" / "_nvidia_smi.py").read_text()
    )
    assert bundle.script({}, 60.0, 1).count(b"nvmlClocksEventReason") == 1


# ------------------------------------------------------------------------------ whole runs (fake GPUs)


def test_every_gpu_and_pair_is_measured_and_the_slow_ones_are_named() -> None:
    machine = {
        "gpus": 4,
        "scale": [1.0, 0.8, 1.0, 1.0],
        "peer_scale": {"2>3": 0.5},
        "pcie": {"3": [4, 16]},
        "reasons": {"0": "0x0000000000000040"},
    }
    result = fake_run(machine)
    assert result["ok"], result["error"]
    data = result["data"]
    assert not data["stopped_early"]
    assert data["cleanup"]["workers_left"] == []
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]
    assert data["gpus"][1]["uuid"] == "GPU-fa4e0001-0000-0000-0000-000000000001"
    assert data["gpus"][1]["pci_bus_id"] == "00000000:19:00.0"
    assert set(data["gpus"][0]["tflops"]) == {"bfloat16", "float16", "float8_e4m3fn"}
    assert data["gpus"][0]["tflops"]["bfloat16"] == pytest.approx(670, rel=0.05)
    assert data["gpus"][0]["gbps"]["memcpy"] == pytest.approx(4200, rel=0.05)
    assert len(data["pairs"]) == 12  # every ordered pair
    assert all(set(p["gbps"]) == {"one_way", "both_ways", "all_active"} for p in data["pairs"])
    assert data["pairs_note"] is None
    assert {p: s["status"] for p, s in data["phases"].items()} == dict.fromkeys(
        data["phases"], "ok"
    )

    summary = scoring.summary(data)
    assert [line.split(": ")[0] for line in summary["slow_gpus"]] == [
        "GPU1 (GPU-fa4e0001-0000-0000-0000-000000000001, 00000000:19:00.0)"
    ]
    assert [line.split(": ")[0] for line in summary["slow_pairs"]] == ["GPU2→GPU3"]
    assert summary["pcie_below_max"][0].startswith("GPU3 (")
    assert summary["hw_throttled"][0].startswith("GPU0 (")
    assert not leftover_workers()


def test_one_gpu_has_no_pairs_and_says_so_and_without_nvidia_smi_no_readings() -> None:
    result = fake_run({"gpus": 1}, smi=False)
    assert result["ok"], result["error"]
    data = result["data"]
    assert data["pairs"] == []
    assert data["pairs_note"] == "1 GPU: no GPU pairs to measure"
    assert not [p for p in data["phases"] if p.startswith("pairs:")]
    assert data["sampler"] == {
        "available": False,
        "samples": 0,
        "interval_s": 0.2,
        "error": "nvidia-smi not found",
    }
    assert data["gpus"][0]["uuid"] == "GPU-fa4e0000-0000-0000-0000-000000000000"  # from torch
    summary = scoring.summary(data)
    assert summary["slow_gpus"] == []
    assert summary["pcie_below_max"] is None  # not read: unknown, never fine
    assert summary["hw_throttled"] is None


def test_a_gpu_that_hangs_is_killed_at_the_deadline_and_the_probe_stops_early() -> None:
    result = fake_run({"gpus": 2, "hang": {"gpu": 1, "op": "memcpy"}}, {"time_budget_s": 6})
    assert result["ok"], result["error"]
    data = result["data"]
    assert data["elapsed_s"] < 10
    assert data["stopped_early"] is True
    assert "budget ran out" in data["stopped"]
    assert data["phases"]["memcpy"]["status"] in ("partial", "stopped")
    assert "memcpy" in data["gpus"][1]["error"]
    assert "memcpy" in data["gpus"][0]["gbps"]
    assert data["phases"]["pairs:all_active"]["status"] == "not_run"
    assert data["cleanup"]["workers_left"] == []
    assert not leftover_workers()
    summary = scoring.summary(data)
    assert summary["slow_gpus"] is None  # GPU1's copies not measured: not judged
    assert summary["unmeasured"][0].startswith("GPU1 (")


# ------------------------------------------------------------------------------ no GPU here


def test_without_torch_it_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    result = probe.collect({})
    assert result["ok"] is False
    assert result["error"].startswith("torch not importable")


@pytest.mark.torch
def test_cpu_torch_is_absent_without_starting_workers() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = run_by_hand("gpubench")
    assert result["ok"] is False
    assert result["error"].startswith("no GPU: CUDA not available to torch")
    assert "gpus" not in result["data"]
