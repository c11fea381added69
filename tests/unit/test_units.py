"""The probes' units (fleet/units/, docs/layers.md): each part has what the layer that reads it
asks for, and the one table gives them out lazily, in its order."""

from __future__ import annotations

import pytest

from fleet import registry
from fleet.analysis.baselines import identity
from fleet.analysis.facts import builtin_facts, higher_is_better, measurements
from fleet.models import HostOutcome, ProbeResult

ASKED_FOR = {
    "checks": ("HELPERS", "add_helpers"),
    "terminal": ("view",),
    "html": ("ANCHOR", "NAV", "TITLE", "INTRO", "shown", "body"),
    "markdown": ("lines",),
    "findings": ("findings",),
}


@pytest.mark.parametrize("role", sorted(ASKED_FOR))
def test_each_part_has_what_its_layer_reads(role: str) -> None:
    missing = [
        f"{probe}.{role} lacks {name}"
        for probe, part in registry.parts(role)
        for name in ASKED_FOR[role]
        if not hasattr(part, name)
    ]
    assert missing == []


def test_key_facts_are_label_and_paths_starting_at_their_own_probe() -> None:
    for probe, facts in registry.parts("facts"):
        for label, paths in getattr(facts, "KEY_FACTS", ()):
            assert label
            assert paths
            assert all(path[0] == probe for path in paths), (probe, label)


def test_helpers_are_underscored_and_named_once() -> None:
    names = [h for _, part in registry.parts("checks") for h in part.HELPERS]
    assert all(name.startswith("_") for name in names)
    assert len(names) == len(set(names))


def test_parts_come_in_the_table_order_and_only_where_they_exist() -> None:
    html = ["imports", "allreduce", "health", "net", "live", "fabric"]
    assert [probe for probe, _ in registry.parts("html")] == html
    assert [probe for probe, _ in registry.parts("markdown")] == ["imports"]
    assert [probe for probe, _ in registry.parts("terminal")] == [
        "imports",
        "allreduce",
        "health",
        "gpubench",
        "live",
    ]
    assert registry.part("dir", "facts") is None  # a unit without facts: only its option
    assert registry.part("system", "facts") is not None
    assert registry.part("uptime", "facts") is None  # a probe without a unit (tests/toy/)
    assert registry.part("health", "checks") is None  # a unit without that part
    with pytest.raises(ValueError, match="unknown unit part"):
        registry.part("gpu", "render")


def test_one_higher_is_better_rule_for_every_measurement() -> None:
    assert higher_is_better("allreduce eager 256 MiB busbw_gbps")
    assert higher_is_better("gpubench slowest GPU bf16_tflops")
    assert higher_is_better("fabric nccl 256 MiB busbw_gbps")
    assert not higher_is_better("allreduce graph 8 B latency_us")


def test_results_beside_probes_and_their_measurements_come_from_units() -> None:
    assert builtin_facts()["fabric"].measure == ("busbw_gbps", "latency_us")
    # asked among a run's results, only those results' units answer
    assert builtin_facts(["system", "fabric"]).keys() == {"fabric"}
    assert builtin_facts(["system"]) == {}
    data = {"backend": "nccl", "large_bytes": 1 << 28, "busbw_gbps": 40.0, "latency_us": 20.0}
    assert measurements("fabric", data) == {
        "fabric nccl 256 MiB busbw_gbps": 40.0,
        "fabric nccl latency_us": 20.0,
    }
    assert measurements("system", {"cpu_count": 8}) == {}


def test_a_probe_keeps_its_one_unit() -> None:
    with pytest.raises(ValueError, match="already has a unit"):
        registry.register("gpu", "somewhere.else")
    registry.register("gpu", "fleet.units.gpu")  # the same again: nothing changes
    assert registry.UNITS["gpu"] == "fleet.units.gpu"


def test_the_generic_layers_call_the_hooks_the_units_declare() -> None:
    """registry.declaring: the units whose part declares a hook, in the table's order; a run
    asks only its own probes' parts."""
    assert [probe for probe, _ in registry.declaring("findings", "findings")] == ["live"]
    assert [probe for probe, _ in registry.declaring("terminal", "checked_view")] == ["allreduce"]
    assert registry.declaring("terminal", "checked_view", among=("system", "gpu")) == []
    assert [probe for probe, _ in registry.declaring("facts", "host_versions")] == ["allreduce"]


def test_a_baseline_reads_a_hosts_software_and_gpus_through_the_units() -> None:
    torch = ran({"version": "2.11.0+cu130", "nccl_version": "2.27.5"})
    allreduce = ran({"nccl_version": "2.28.9", "device_name": "H200", "device_count": 8})
    host = HostOutcome("a", "ok", "a", probes={"torch": torch, "allreduce": allreduce})
    assert identity.host_versions(host) == {
        "torch": "2.11.0+cu130",
        "cuda": "13.0",  # from the wheel's build tag
        "nccl": "2.28.9",  # the one the allreduce ran on
        "driver": None,
    }
    assert identity.gpu_identity(host) == ("H200", 8)
    assert identity.gpu_identity(HostOutcome("b", "ok", "b")) is None


def ran(data: dict[str, object]) -> ProbeResult:
    return ProbeResult("ok", True, data, None, 1.0)
