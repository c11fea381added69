"""gpubench's scoring (fleet/units/gpubench/facts.py) and datasheets (gpu_datasheets.py) on plain
data, and the inference pack's gpubench-* rules: a slow GPU, a slow pair, a PCIe link down and a
HW throttle under load fail and are named by index, UUID and bus id; what was not measured is
unknown, never a pass; one GPU has no pair to judge; a run without gpubench is n/a."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fleet.analysis.facts import higher_is_better, measurements
from fleet.checks import evaluate
from fleet.models import Run
from fleet.units.gpubench import facts as gpubench
from fleet.units.gpubench.datasheets import datasheet_for, pcie_gbps
from tests.conftest import ROOT
from tests.unit.helpers import host, pack_rules

H200 = "NVIDIA H200"


def bench_gpu(index: int, scale: float = 1.0, name: str = H200, **load: Any) -> dict[str, Any]:
    return {
        "index": index,
        "cuda_index": index,
        "uuid": f"GPU-{index:08x}-aaaa",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "name": name,
        "tflops": {"bfloat16": 673.2 * scale, "float16": 660.0 * scale},
        "gbps": {
            "memcpy": 4276.0 * scale,
            "h2d": 55.0,
            "d2h": 54.0,
            "peer_out_all_active": 390.0,
            "peer_in_all_active": 390.0,
        },
        "load": {
            "samples": 12,
            "pcie_gen": 5,
            "pcie_gen_max": 5,
            "pcie_width": 16,
            "pcie_width_max": 16,
            "pcie_below_max": False,
            "pcie_read_during": "host copies",
            "clock_events": ["sw_power_cap"],
            "hw_throttle": False,
            "hw_throttle_samples": 0,
            **load,
        },
    }


def bench(count: int = 2, **changes: Any) -> dict[str, Any]:
    gpus = [bench_gpu(i) for i in range(count)]
    pairs = [
        {"src": a, "dst": b, "peer_access": True, "gbps": {"one_way": 393.9, "both_ways": 380.0}}
        for a in range(count)
        for b in range(count)
        if a != b
    ]
    data = {
        "device_count": count,
        "gpus": gpus,
        "pairs": pairs,
        "pairs_note": None if count > 1 else "1 GPU: no GPU pairs to measure",
        "stopped_early": False,
        "stopped": None,
    }
    data.update(changes)
    return data


# ------------------------------------------------------------------------------ scoring


def test_twins_within_noise_pass() -> None:
    summary = gpubench.summary(bench())
    assert summary["slow_gpus"] == []
    assert summary["slow_pairs"] == []
    assert summary["pcie_below_max"] == []
    assert summary["hw_throttled"] == []
    assert gpubench.off(summary) == []


def test_a_gpu_11_percent_below_the_best_is_named_by_index_uuid_and_bus() -> None:
    data = bench(4)
    data["gpus"][2] = bench_gpu(2, scale=0.89)
    summary = gpubench.summary(data)
    (line,) = summary["slow_gpus"]
    assert line.startswith("GPU2 (GPU-00000002-aaaa, 00000000:1A:00.0): BF16 matmul 599.1 TFLOPS")
    assert "11.0% below the best on its host (GPU0: 673.2)" in line
    assert "also FP16 -11.0%, memory -11.0%" in line
    figure = summary["gpus"][2]["figures"]["bf16_tflops"]
    assert figure["vs_host_best"] == pytest.approx(0.89)
    assert figure["pct_of_datasheet"] == pytest.approx(60.6, abs=0.1)  # of 989.5 dense BF16


def test_the_tolerance_is_configurable() -> None:
    data = bench()
    data["gpus"][1] = bench_gpu(1, scale=0.93)
    assert gpubench.summary(data)["slow_gpus"] == []
    assert len(gpubench.summary(data, tolerance=0.05)["slow_gpus"]) == 1


def test_a_pair_more_than_20_percent_below_the_median_pair() -> None:
    data = bench(4)
    slow = next(p for p in data["pairs"] if (p["src"], p["dst"]) == (1, 3))
    slow["gbps"]["one_way"] = 300.0  # 23.8% below 393.9
    (line,) = gpubench.summary(data)["slow_pairs"]
    assert line == (
        "GPU1→GPU3: peer copy one way 300 GB/s, 23.8% below the host's median pair (393.9)"
    )
    slow["gbps"]["one_way"] = 330.0  # 16% below: within 20%
    assert gpubench.summary(data)["slow_pairs"] == []


def test_peer_totals_are_shown_not_judged_as_a_slow_gpu() -> None:
    data = bench()
    data["gpus"][1]["gbps"]["peer_in_all_active"] = 100.0
    summary = gpubench.summary(data)
    assert summary["slow_gpus"] == []
    assert summary["gpus"][1]["figures"]["peer_in_gbps"]["vs_host_best"] == pytest.approx(
        0.2564, abs=1e-3
    )


def test_what_was_not_measured_is_not_judged() -> None:
    data = bench()
    del data["gpus"][1]["gbps"]["memcpy"]
    data["gpus"][1]["error"] = "memcpy: no result within its deadline"
    summary = gpubench.summary(data)
    assert summary["slow_gpus"] is None
    assert summary["unmeasured"] == [
        "GPU1 (GPU-00000001-aaaa, 00000000:19:00.0): memory copy (read + write) not measured "
        "(memcpy: no result within its deadline)"
    ]
    stopped = bench(stopped_early=True, stopped="the 30s budget ran out before pairs:one_way")
    for pair in stopped["pairs"]:
        pair["gbps"] = {}
    assert gpubench.summary(stopped)["slow_pairs"] is None
    assert "stopped early: the 30s budget" in gpubench.off(gpubench.summary(stopped))[-1]


def test_pcie_and_throttle_under_load_and_their_unknowns() -> None:
    data = bench()
    data["gpus"][1]["load"].update(pcie_gen=4, pcie_below_max=True)
    data["gpus"][0]["load"].update(
        hw_throttle=True, hw_throttle_samples=3, clock_events=["hw_slowdown", "sw_power_cap"]
    )
    summary = gpubench.summary(data)
    assert summary["pcie_below_max"] == [
        "GPU1 (GPU-00000001-aaaa, 00000000:19:00.0): PCIe Gen4 x16 under load (host copies), "
        "max Gen5 x16"
    ]
    assert summary["hw_throttled"] == [
        "GPU0 (GPU-00000000-aaaa, 00000000:18:00.0): hw_slowdown under load (3 of 12 samples)"
    ]
    data["gpus"][0]["load"] = {"samples": 0, "pcie_below_max": None, "hw_throttle": None}
    unread = gpubench.summary(data)
    assert unread["pcie_below_max"] is None
    assert unread["hw_throttled"] is None


def test_cohort_medians_span_hosts_of_one_model() -> None:
    a, b, c = bench(), bench(), bench()
    c["gpus"][0] = bench_gpu(0, scale=0.8)
    rtx = bench(gpus=[bench_gpu(0, name="NVIDIA GeForce RTX 4090", scale=0.2)])
    datas = [a, b, c, rtx]
    medians = gpubench.cohort_medians(datas)
    assert medians[H200]["bf16_tflops"] == pytest.approx(673.2)
    assert medians["NVIDIA GeForce RTX 4090"]["bf16_tflops"] == pytest.approx(134.64)
    assert gpubench.cohort_sizes(datas) == {H200: 6, "NVIDIA GeForce RTX 4090": 1}
    summary = gpubench.summary(c, cohort=medians, cohort_size=gpubench.cohort_sizes(datas))
    assert summary["cohort_gpus"] == 6
    assert summary["slow_vs_cohort"][0].startswith("GPU0 (GPU-00000000-aaaa")
    assert (
        "20.0% below the median of its model's GPUs in the run (673.2)"
        in summary["slow_vs_cohort"][0]
    )
    # said once in the terminal: slow on its host already
    assert [line.split(":")[0] for line in gpubench.off(summary)] == ["slow GPU"]


def test_headlines_are_higher_is_better_measurements_for_the_diff() -> None:
    data = bench()
    data["gpus"][1] = bench_gpu(1, scale=0.5)
    found = measurements("gpubench", data)
    assert found["gpubench slowest GPU bfloat16_tflops"] == pytest.approx(336.6)
    assert found["gpubench slowest pair one_way_gbps"] == pytest.approx(393.9)
    assert all(higher_is_better(name) for name in found)
    assert not higher_is_better("allreduce eager 8 B latency_us")


# ------------------------------------------------------------------------------ datasheets


@pytest.mark.parametrize(
    ("name", "model", "bf16"),
    [
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA H200 NVL", "H200 NVL", 835.5),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.5),
        ("NVIDIA H100 NVL", "H100 NVL", 835.5),
        ("NVIDIA B200", "B200 (HGX)", 2250),
        ("NVIDIA B300 SXM6 AC", "B300 (HGX)", 2250),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 312),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 312),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe", 312),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM", 312),
        ("NVIDIA L40S", "L40S", 362.05),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell", 503.8),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", 503.8),
        ("NVIDIA GeForce RTX 5090", "RTX 5090", 209.5),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
    ],
)
def test_datasheets_by_the_names_gpus_report(name: str, model: str, bf16: float) -> None:
    sheet = datasheet_for(name)
    assert sheet is not None
    assert (sheet.model, sheet.bf16_tflops) == (model, bf16)
    assert sheet.source.startswith(("https://", "NVIDIA"))


@pytest.mark.parametrize(
    "name",
    ["NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA GB200", "Tesla V100", None],
)
def test_models_not_in_the_table_have_no_datasheet(name: str | None) -> None:
    assert datasheet_for(name) is None


def test_pcie_rates_per_direction() -> None:
    assert pcie_gbps(5, 16) == pytest.approx(63.0, abs=0.1)
    assert pcie_gbps(4, 16) == pytest.approx(31.5, abs=0.1)
    assert pcie_gbps(3, 8) == pytest.approx(7.88, abs=0.01)


# ------------------------------------------------------------------------------ the pack's rules

RULES = (
    "gpubench-gpu-vs-host-best",
    "gpubench-pair-vs-host-median",
    "gpubench-pcie-under-load",
    "gpubench-hw-throttle-under-load",
    "gpubench-gpu-vs-cohort",
)


def verdicts(*datas: dict[str, Any] | None) -> dict[str, list[tuple[str, Any]]]:
    """Each gpubench rule's (verdict, observed) on hosts h0, h1, … (None: gpubench not run)."""
    outcomes = {}
    for number, data in enumerate(datas):
        name = f"h{number}"
        outcomes[name] = host(name, gpubench=data) if data is not None else host(name, system={})
    run = Run("0", "2026-01-01T00:00:00Z", "", "x", outcomes, ("gpubench",))
    rules = [r for r in pack_rules() if r.id.startswith("gpubench-")]
    assert tuple(r.id for r in rules) == RULES
    report = evaluate(rules, run)
    return {r.rule.id: [(v.status, v.observed) for v in r.verdicts] for r in report.results}


def test_a_healthy_two_gpu_host_passes_every_gpubench_rule() -> None:
    found = verdicts(bench())
    assert {rule: v[0][0] for rule, v in found.items()} == dict.fromkeys(RULES, "pass")


def test_the_rules_fail_and_name_the_gpu() -> None:
    data = bench(8)
    data["gpus"][5] = bench_gpu(
        5,
        scale=0.85,
        pcie_gen=3,
        pcie_below_max=True,
        hw_throttle=True,
        clock_events=["hw_power_brake_slowdown"],
        hw_throttle_samples=2,
    )
    next(p for p in data["pairs"] if (p["src"], p["dst"]) == (6, 7))["gbps"]["both_ways"] = 150.0
    found = verdicts(data, bench(8))
    for rule in RULES:
        status, observed = found[rule][0]
        assert status == "fail", rule
        assert "GPU5 (GPU-00000005-aaaa, 00000000:1D:00.0)" in str(observed) or rule == RULES[1]
    assert "GPU6→GPU7: peer copy, both ways at once 150 GB/s" in str(found[RULES[1]][0][1])
    assert [status for status, _ in found[RULES[0]]] == ["fail", "pass"]


def test_not_measured_is_unknown_never_a_pass() -> None:
    data = bench()
    del data["gpus"][0]["tflops"]["bfloat16"]
    data["gpus"][1]["load"] = {"samples": 0, "pcie_below_max": None, "hw_throttle": None}
    for pair in data["pairs"]:
        pair["gbps"] = {}
    found = verdicts(data)
    assert {rule: v[0][0] for rule, v in found.items()} == dict.fromkeys(RULES, "unknown")


def test_one_gpu_judges_its_link_and_clocks_but_no_pair_or_twin() -> None:
    found = verdicts(bench(1))
    assert {rule: v[0][0] for rule, v in found.items()} == {
        "gpubench-gpu-vs-host-best": "n/a",
        "gpubench-pair-vs-host-median": "n/a",
        "gpubench-pcie-under-load": "pass",
        "gpubench-hw-throttle-under-load": "pass",
        "gpubench-gpu-vs-cohort": "n/a",
    }


def test_without_gpubench_the_rules_are_not_applicable() -> None:
    found = verdicts(None)
    assert {v[0][0] for v in found.values()} == {"n/a"}


def test_tolerances_come_from_the_inventory() -> None:
    data = bench()
    data["gpus"][1] = bench_gpu(1, scale=0.93)
    run = Run("0", "", "", "x", {"h0": host("h0", gpubench=copy.deepcopy(data))}, ("gpubench",))
    rule = [r for r in pack_rules() if r.id == RULES[0]]
    strict = evaluate(rule, run, {"h0": {"gpubench": {"tolerance": 0.05}}})
    assert strict.results[0].verdicts[0].status == "fail"
    assert evaluate(rule, run).results[0].verdicts[0].status == "pass"


REAL = ROOT / "tests" / "probes" / "golden" / "real_run"


def test_the_real_h200_run_measures_every_figure_and_passes_what_one_gpu_can_judge() -> None:
    """The probe's first real run (bench/device_gpubench.sh, single H200): each figure was within
    5% of the plain torch reference run in the same call (bench/README.md)."""
    run = Run.from_dict(json.loads((REAL / "h200x1_gpubench_run.json").read_text()))
    data = run.hosts["local"].probes["gpubench"].data
    (gpu,) = data["gpus"]
    assert set(gpu["tflops"]) == {"bfloat16", "float16", "float8_e4m3fn"}
    assert set(gpu["gbps"]) == {"memcpy", "h2d", "d2h"}
    assert data["cleanup"]["workers_left"] == []
    assert data["pairs_note"] == "1 GPU: no GPU pairs to measure"
    statuses = {
        r.rule.id: {v.status for v in r.verdicts} for r in evaluate(pack_rules(), run).results
    }
    assert statuses["gpubench-pcie-under-load"] == {"pass"}
    assert statuses["gpubench-hw-throttle-under-load"] == {"pass"}
    assert statuses["gpubench-gpu-vs-host-best"] == {"n/a"}  # one GPU: no best to be below


def test_the_real_h200_loaded_by_a_second_process_is_named_against_its_model() -> None:
    """The same GPU probed while a second process loaded it (about 37% slower), beside the clean
    run as a second host: the cohort rule names the loaded GPU by index, UUID and bus id."""
    path = REAL / "h200x1_gpubench_clean_and_loaded_run.json"
    report = evaluate(pack_rules(), Run.from_dict(json.loads(path.read_text())))
    result = next(r for r in report.results if r.rule.id == "gpubench-gpu-vs-cohort")
    failed = [v for v in result.verdicts if v.status == "fail"]
    assert [v.host for v in failed] == ["h200-loaded"]
    assert "GPU0 (GPU-42cb24c1-c307-ebb2-31f7-507becdb10f5, 00000000:00:06.0)" in str(
        failed[0].observed
    )
