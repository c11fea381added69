"""The cross-host diff: divergent facts, majority values, and what is never divergence."""

from __future__ import annotations

from typing import Any

from fleet.diff import DivergenceGroup, diverging_facts, flatten, group_divergences, list_delta
from fleet.models import HostOutcome, ProbeResult


def host(name: str, status: str = "ok", **probes: dict[str, Any]) -> HostOutcome:
    results = {p: ProbeResult("ok", True, data, None, 0.1) for p, data in probes.items()}
    return HostOutcome(name=name, status=status, address=name, probes=results)


def test_flatten_keeps_scalar_lists_whole_and_indexes_object_lists() -> None:
    facts = flatten({"gpus": [{"name": "H200"}, {"name": "H200"}], "arch": ["sm_90"]}, "gpu")
    assert facts == {
        "gpu.gpus.len": 2,
        "gpu.gpus.0.name": "H200",
        "gpu.gpus.1.name": "H200",
        "gpu.arch": ("sm_90",),
    }


def test_divergent_fact_shows_majority_and_the_hosts_that_differ() -> None:
    outcomes = [host(f"n{i}", torch={"version": "2.9.0"}) for i in range(6)]
    outcomes += [host("n6", torch={"version": "2.7.0"}), host("n7", torch={"version": "2.7.0"})]
    [divergence] = diverging_facts(outcomes)
    assert divergence.fact == "torch.version"
    assert divergence.majority == "2.9.0" and len(divergence.majority_hosts) == 6
    assert divergence.others == (("2.7.0", ("n6", "n7")),)


def test_identities_and_timings_are_not_divergence() -> None:
    outcomes = [
        host(
            "a",
            system={"hostname": "a", "elapsed_s": 1.0},
            gpu={"gpus": [{"uuid": "GPU-1", "pci_bus_id": "00:01"}]},
        ),
        host(
            "b",
            system={"hostname": "b", "elapsed_s": 3.0},
            gpu={"gpus": [{"uuid": "GPU-2", "pci_bus_id": "00:02"}]},
        ),
    ]
    assert diverging_facts(outcomes) == []


def test_unreachable_hosts_and_unreported_facts_are_not_compared() -> None:
    outcomes = [
        host("a", torch={"version": "2.9.0"}),
        host("b", torch={"version": "2.9.0"}),
        host("c", status="unreachable"),
        host("d", system={"os": "x"}),
    ]
    assert diverging_facts(outcomes) == []


def test_probe_status_difference_is_divergence() -> None:
    a = host("a", gpu={"driver_version": "580"})
    b = HostOutcome(
        name="b",
        status="ok",
        address="b",
        probes={"gpu": ProbeResult("absent", False, {}, "nvidia-smi not found", 0.1)},
    )
    [divergence] = diverging_facts([a, b])
    assert divergence.fact == "gpu.status"
    assert {divergence.majority, divergence.others[0][0]} == {"ok", "absent"}


def test_list_delta_names_added_and_removed_items() -> None:
    assert list_delta(("a", "b", "c"), ("a", "c", "d")) == "+d −b"
    assert list_delta("x", "y") is None


def test_unset_on_some_hosts_is_divergence_when_the_probe_ran() -> None:
    outcomes = [host("a", nccl={"env": {}}), host("b", nccl={"env": {}}),
                host("c", nccl={"env": {"NCCL_P2P_DISABLE": "1"}})]
    [divergence] = diverging_facts(outcomes)
    assert divergence.fact == "nccl.env.NCCL_P2P_DISABLE"
    assert divergence.majority is None and divergence.others == (("1", ("c",)),)


def test_facts_splitting_hosts_alike_collapse_into_one_group() -> None:
    matrix8 = {str(i): {str(j): False for j in range(8) if j != i} for i in range(8)}
    matrix2 = {"0": {"1": True}, "1": {"0": True}}
    outcomes = [host("a", torch={"p2p_access": matrix2, "version": "2.9"}),
                host("b", torch={"p2p_access": matrix2, "version": "2.9"}),
                host("c", torch={"p2p_access": matrix8, "version": "2.7"})]
    shown = group_divergences(diverging_facts(outcomes))
    groups = [d for d in shown if isinstance(d, DivergenceGroup)]
    assert len(groups) == 1 and groups[0].parent == "torch.p2p_access.*.*"
    assert len(groups[0].items) == 56 and groups[0].differing_hosts == ("c",)
    assert [d.fact for d in shown if not isinstance(d, DivergenceGroup)] == ["torch.version"]
