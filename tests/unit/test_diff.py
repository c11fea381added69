"""The cross-host diff engine over hand-made host outcomes."""

from __future__ import annotations

from fleet.analysis.across_hosts.diff import (
    DivergenceGroup,
    compare_hosts,
    group_divergences,
    list_delta,
)
from fleet.analysis.facts import ProbeFacts, declared_facts, flatten
from fleet.models import HostOutcome, ProbeResult
from tests.unit.helpers import allreduce, gpu, host

DECLARED = declared_facts()


def test_flatten_keeps_scalar_lists_whole_and_indexes_object_lists() -> None:
    facts = flatten({"gpus": [{"name": "H200"}, {"name": "H200"}], "arch": ["sm_90"]}, "gpu")
    assert facts == {
        "length(gpu.gpus)": 2,
        "gpu.gpus[0].name": "H200",
        "gpu.gpus[1].name": "H200",
        "gpu.arch": ("sm_90",),
    }


def test_majority_and_outliers_with_compact_host_lists() -> None:
    outcomes = [host(f"gpu-0{i}", torch={"version": "2.11.0"}) for i in range(1, 7)]
    outcomes += [
        host("gpu-07", torch={"version": "2.7.0"}),
        host("gpu-08", torch={"version": "2.9.0"}),
    ]
    diff = compare_hosts(outcomes, DECLARED)
    [divergence] = diff.values
    assert divergence.fact == "torch.version"
    assert divergence.majority == "2.11.0"
    assert divergence.others == (("2.7.0", ("gpu-07",)), ("2.9.0", ("gpu-08",)))
    assert diff.odd_hosts == ("gpu-07", "gpu-08")


def test_a_tie_is_a_split_with_no_majority_and_no_odd_host() -> None:
    """Two hosts that disagree: a 1–1 split, neither is 'the majority' nor odd (issue 12, 6)."""
    outcomes = [host("a", torch={"version": "1"}), host("b", torch={"version": "2"})]
    diff = compare_hosts(outcomes, DECLARED)
    first = diff.values[0]
    again = compare_hosts(list(reversed(outcomes)), DECLARED).values[0]
    assert first == again  # a stable order, but no winner
    assert first.split
    assert first.differing_hosts == ()
    assert diff.odd_hosts == ()
    assert first.hosts == ("a", "b")


def test_all_different_lists_every_value() -> None:
    outcomes = [host(h, torch={"version": v}) for h, v in (("a", "1"), ("b", "2"), ("c", "3"))]
    [divergence] = compare_hosts(outcomes, DECLARED).values
    assert len(divergence.others) == 2
    assert len(divergence.majority_hosts) == 1


def test_identities_volatiles_and_measurements_are_not_divergence() -> None:
    outcomes = [
        host("a", system={"hostname": "a"}, gpu=gpu(), allreduce=allreduce(10, 300)),
        host("b", system={"hostname": "b"}, gpu=gpu(), allreduce=allreduce(11, 290)),
    ]
    assert compare_hosts(outcomes, DECLARED).clean


def test_unset_on_some_hosts_is_divergence_when_the_probe_ran() -> None:
    outcomes = [
        host("a", nccl={"env": {}}),
        host("b", nccl={"env": {}}),
        host("c", nccl={"env": {"NCCL_P2P_DISABLE": "1"}}),
    ]
    [divergence] = compare_hosts(outcomes, DECLARED).values
    assert divergence.fact == "nccl.env.NCCL_P2P_DISABLE"
    assert divergence.majority is None
    assert divergence.others == (("1", ("c",)),)


def test_unreachable_hosts_and_absent_probes_are_listed_not_dropped() -> None:
    absent = HostOutcome(
        name="c",
        status="ok",
        address="c",
        probes={"torch": ProbeResult("absent", False, {}, "torch not importable", 0.1)},
    )
    dead = HostOutcome(name="d", status="unreachable", address="d", error="connection refused")
    outcomes = [host("a", torch={"version": "2"}), host("b", torch={"version": "2"}), absent, dead]
    diff = compare_hosts(outcomes, DECLARED)
    assert [(u.host, u.probe, u.status) for u in diff.unreported] == [
        ("c", "torch", "absent"),
        ("d", None, "unreachable"),
    ]
    assert [d.fact for d in diff.values] == ["_status.torch"]  # the name rules use


def test_name_sets_are_compared_item_by_item() -> None:
    base = ["_SymmetricMemory", "empty", "rendezvous"]
    modules = lambda names: {"modules": {"torch.distributed._symmetric_memory": {"names": names}}}  # noqa: E731
    outcomes = [host(f"gpu-0{i}", dir=modules(base)) for i in range(1, 7)]
    outcomes += [
        host("gpu-07", dir=modules(["SymmetricMemory", "empty", "rendezvous"])),
        host("gpu-08", dir=modules(["empty", "rendezvous"])),
    ]
    [names] = compare_hosts(outcomes, DECLARED).sets
    assert names.fact == 'dir.modules."torch.distributed._symmetric_memory".names'
    assert names.missing == (("_SymmetricMemory", ("gpu-07", "gpu-08")),)
    assert names.extra == (("SymmetricMemory", ("gpu-07",)),)


def test_slow_host_is_flagged_against_its_cohort_median() -> None:
    outcomes = [host(f"n{i}", gpu=gpu(), allreduce=allreduce(10.0, 300.0)) for i in range(5)]
    outcomes.append(host("slow", gpu=gpu(), allreduce=allreduce(31.0, 100.0)))
    diff = compare_hosts(outcomes, DECLARED, tolerance=0.25)
    assert {(o.host, o.measure, o.factor) for o in diff.outliers} == {
        ("slow", "allreduce eager 8 B latency_us", 3.1),
        ("slow", "allreduce eager 256 MiB busbw_gbps", 3.0),
    }


def test_cohorts_keep_pcie_boxes_apart_from_nvlink_boxes() -> None:
    outcomes = [host(f"nv{i}", gpu=gpu(), allreduce=allreduce(10.0, 300.0)) for i in range(3)]
    outcomes += [
        host(f"pc{i}", gpu=gpu("RTX PRO 6000", 8, "pcie"), allreduce=allreduce(30.0, 40.0))
        for i in range(3)
    ]
    diff = compare_hosts(outcomes, DECLARED)
    assert diff.outliers == ()
    assert {c.name for c in diff.cohorts} == {"2× NVIDIA H200 · nvlink", "8× RTX PRO 6000 · pcie"}


def test_within_tolerance_is_not_an_outlier() -> None:
    outcomes = [host(f"n{i}", gpu=gpu(), allreduce=allreduce(10.0 + i, 300.0)) for i in range(4)]
    assert compare_hosts(outcomes, DECLARED, tolerance=0.25).outliers == ()


def test_facts_splitting_hosts_alike_collapse_into_one_group() -> None:
    matrix8 = {str(i): {str(j): False for j in range(8) if j != i} for i in range(8)}
    matrix2 = {"0": {"1": True}, "1": {"0": True}}
    outcomes = [
        host("a", torch={"p2p_access": matrix2, "version": "2.9"}),
        host("b", torch={"p2p_access": matrix2, "version": "2.9"}),
        host("c", torch={"p2p_access": matrix8, "version": "2.7"}),
    ]
    shown = group_divergences(compare_hosts(outcomes, DECLARED).values)
    groups = [d for d in shown if isinstance(d, DivergenceGroup)]
    # pairs both hosts have (True vs False), and pairs only the 8-GPU host has (unset vs False)
    assert sorted(len(g.items) for g in groups) == [2, 54]
    assert all(g.uniform and g.parent == "torch.p2p_access.*.*" for g in groups)
    assert {g.differing_hosts for g in groups} == {("c",)}
    assert [d.fact for d in shown if not isinstance(d, DivergenceGroup)] == ["torch.version"]


def test_identical_payload_objects_are_flattened_once() -> None:
    shared = {"version": "2.11.0", "arch_list": ["sm_90"]}
    outcomes = [host(f"h{i}", torch=shared) for i in range(1000)]
    assert compare_hosts(outcomes, DECLARED).clean


def test_declarations_are_read_from_the_probe_files() -> None:
    assert DECLARED["system"] == ProbeFacts(
        identity=("hostname",), hardware=("cpu_count", "cpus_usable", "memory_gib", "machine")
    )
    assert "arch_list" in DECLARED["torch"].sets
    assert "devices[*].name" in DECLARED["torch"].hardware
    assert "devices[*].arch_supported" not in DECLARED["torch"].hardware


def test_list_delta_names_added_and_removed_items() -> None:
    assert list_delta(("a", "b", "c"), ("a", "c", "d")) == "+d −b"
    assert list_delta("x", "y") is None
