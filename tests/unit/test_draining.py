"""Which Slurm nodes `fleet check --drain` / `--resume` change, and with which command: the pure
plan (fleet/findings/draining.py) over plain findings, host outcomes and node states."""

from __future__ import annotations

import dataclasses

from fleet.api.draining import recheck_candidates
from fleet.findings.draining import (
    MAX_REASON,
    HostSeen,
    drain_reason,
    plan_after_recheck,
    plan_drain,
    plan_resume,
)
from fleet.findings.model import Finding
from fleet.inventory.slurm import SlurmNode, node_from_state
from fleet.models import HostOutcome, Run

RUN = "20261203T030512Z-1a2b3c4d"


def ecc(host: str = "h0002", severity: str = "error", action: str = "reset-gpu") -> Finding:
    return Finding(
        severity=severity,
        kind="health-ecc-uncorrected",
        what="health-ecc-uncorrected: GPU1 (00000000:07:00.0) 1 uncorrected",
        hosts=(host,),
        action=action,
        where="GPU1 (00000000:07:00.0)",
    )


def node(name: str, state: str = "idle", reason: str = "") -> SlurmNode:
    return node_from_state(name, state, reason)


def nodes(*named: SlurmNode) -> dict[str, SlurmNode]:
    return {n.name: n for n in named}


OK = HostSeen("ok", health_ran=True)
FLEET_REASON = f"fleet: h0002 GPU1 health-ecc-uncorrected → reset-gpu, run {RUN}"


def test_reason_names_fleet_the_host_gpu_finding_action_and_run() -> None:
    assert drain_reason("h0002", [ecc()], RUN) == FLEET_REASON
    more = drain_reason("h0002", [ecc(), ecc(action="inspect-hw")], RUN)
    assert more.endswith(f"→ reset-gpu (+1 more), run {RUN}")


def test_long_or_odd_reasons_are_cut_and_cleaned_never_losing_the_run() -> None:
    odd = Finding("error", "x" * 300 + "\"'\n$", "what", ("h1",), action="drain")
    reason = drain_reason("h1", [odd], RUN)
    assert len(reason) <= MAX_REASON
    assert reason.startswith("fleet: h1 xxx")
    assert reason.endswith(f"→ drain, run {RUN}")
    assert not set("\"'\n$") & set(reason)


def test_only_error_findings_with_an_out_of_service_action_drain() -> None:
    findings = [
        ecc("a"),
        ecc("b", severity="warning"),
        ecc("c", action="fix-config"),
        ecc("d", action="contact-vendor"),
        ecc("e", action="reboot"),
    ]
    seen = dict.fromkeys("abcde", OK)
    steps = plan_drain(findings, seen, {}, nodes(*(node(n) for n in "abcde")), RUN)
    assert [(s.node, s.verb) for s in steps] == [("a", "drain"), ("d", "drain"), ("e", "drain")]
    assert steps[0].argv == (
        "scontrol",
        "update",
        "NodeName=a",
        "State=DRAIN",
        f"Reason=fleet: a GPU1 health-ecc-uncorrected → reset-gpu, run {RUN}",
    )
    assert steps[0].command.startswith("scontrol update NodeName=a State=DRAIN 'Reason=fleet: a")


def test_a_host_not_reached_is_never_drained_on_that_ground() -> None:
    unreachable = Finding("error", "unreachable", "not reached", ("h1",), action="check-access")
    seen = {"h1": HostSeen("unreachable"), "h2": HostSeen("timeout")}
    findings = [unreachable, ecc("h2")]  # h2's finding from a probe before it timed out
    assert plan_drain(findings, seen, {}, nodes(node("h1"), node("h2")), RUN) == []


def test_drained_for_another_reason_is_left_alone_and_said_so() -> None:
    by_hand = node("h0002", "drained", "ECC errors on GPU1")
    [step] = plan_drain([ecc()], {"h0002": OK}, {}, nodes(by_hand), RUN)
    assert (step.verb, step.argv) == ("keep", ())
    assert "ECC errors on GPU1" in step.why
    assert "left alone" in step.why
    down = node("h0002", "down*", "Not responding")
    [step] = plan_drain([ecc()], {"h0002": OK}, {}, nodes(down), RUN)
    assert (step.verb, step.argv) == ("keep", ())


def test_drained_by_fleet_is_kept_for_the_same_cause_and_updated_for_another() -> None:
    earlier = FLEET_REASON.replace(RUN, "20261202T000000Z-00000000")
    same = node("h0002", "drained", earlier)
    [step] = plan_drain([ecc()], {"h0002": OK}, {}, nodes(same), RUN)
    assert (step.verb, step.argv) == ("keep", ())
    assert "already drained by fleet" in step.why
    other = node("h0002", "draining", "fleet: h0002 net-same-active-ports → inspect-hw, run x")
    [step] = plan_drain([ecc()], {"h0002": OK}, {}, nodes(other), RUN)
    assert step.verb == "update"
    assert step.argv[-1] == f"Reason={FLEET_REASON}"


def test_inventory_hosts_map_to_their_slurm_node_or_are_said_not_to_be_one() -> None:
    findings = [ecc("h0002"), ecc("lab-box")]
    seen = {"h0002": OK, "lab-box": OK}
    steps = plan_drain(findings, seen, {"h0002": "gpu-02"}, nodes(node("gpu-02")), RUN)
    assert [(s.node, s.host, s.verb) for s in steps] == [
        ("gpu-02", "h0002", "drain"),
        ("lab-box", "lab-box", "keep"),
    ]
    assert steps[0].argv[2] == "NodeName=gpu-02"
    assert steps[0].reason.startswith("fleet: h0002 GPU1")
    assert "not a Slurm node" in steps[1].why


def test_resume_only_fleet_drained_nodes_whose_findings_are_gone() -> None:
    drained = [
        node("clean", "drained", "fleet: clean … run x"),
        node("sick", "drained", "fleet: sick … run x"),
        node("by-hand", "drained", "bad fan"),
        node("unreached", "drained", "fleet: unreached … run x"),
        node("no-health", "drained", "fleet: no-health … run x"),
        node("idle", "idle"),
    ]
    seen = {
        "clean": OK,
        "sick": OK,
        "by-hand": OK,
        "unreached": HostSeen("unreachable"),
        "no-health": HostSeen("ok", health_ran=False),
        "idle": OK,
    }
    steps = plan_resume([ecc("sick")], seen, {}, nodes(*drained))
    verbs = {s.node: s.verb for s in steps}
    assert verbs == {"clean": "resume", "sick": "keep", "unreached": "keep", "no-health": "keep"}
    [resume] = [s for s in steps if s.verb == "resume"]
    assert resume.argv == ("scontrol", "update", "NodeName=clean", "State=RESUME")


def test_after_a_recheck_healthy_nodes_stay_and_the_others_are_drained_again() -> None:
    before = nodes(
        node("healed", "drained", "fleet: healed GPU1 health-ecc-uncorrected → reset-gpu, run a"),
        node("still", "drained", "fleet: still GPU1 health-ecc-uncorrected → reset-gpu, run a"),
        node("worse", "drained", "fleet: worse GPU1 health-ecc-uncorrected → reset-gpu, run a"),
        node("silent", "drained", "fleet: silent GPU1 health-ecc-uncorrected → reset-gpu, run a"),
    )
    worse = Finding("error", "health-gpus-on-bus-listed", "gone", ("worse",), action="reboot")
    seen = {"healed": OK, "still": OK, "worse": OK, "silent": HostSeen("unavailable")}
    steps = {s.node: s for s in plan_after_recheck([ecc("still"), worse], seen, before, RUN)}
    assert (steps["healed"].verb, steps["healed"].argv) == ("resumed", ())
    assert steps["still"].reason == before["still"].reason, "same cause: its reason kept"
    assert steps["worse"].reason == f"fleet: worse health-gpus-on-bus-listed → reboot, run {RUN}"
    assert steps["silent"].reason == before["silent"].reason
    assert all(steps[n].verb == "drain" for n in ("still", "worse", "silent"))


def test_a_slurm_run_rechecks_only_its_own_hosts_that_fleet_drained_and_that_hold_no_job() -> None:
    def entry(state: str, reason: str | None) -> dict[str, object]:
        return {"state": state, "reason": reason, "usable": False, "launched": False}

    hosts = {
        name: HostOutcome(name, "unavailable", name)
        for name in ("n1", "n2", "n3", "n4")  # n5: left out by --limit
    }
    record = {
        "n1": entry("drained", "fleet: n1 GPU1 health-row-remap → reset-gpu, run a"),
        "n2": entry("draining", "fleet: n2 … run a"),  # a job still runs there
        "n3": entry("drained", "bad fan"),
        "n4": entry("idle", None),
        "n5": entry("drained", "fleet: n5 … run a"),
    }
    run = Run("1", "2026-12-03T03:00:00Z", "2026-12-03T03:00:05Z", "ab" * 32, hosts)
    run = dataclasses.replace(run, slurm={"nodes": record})
    recheck = recheck_candidates(run, timeout_s=60)
    assert recheck is not None
    assert recheck.names == ["n1"]
    assert recheck.reservation.startswith("fleet-recheck-20261203T030000Z-abababab")
    create, resume = recheck.commands()
    assert create[:3] == ("scontrol", "create", "reservation")
    assert "Nodes=n1" in create
    assert resume == ("scontrol", "update", "NodeName=n1", "State=RESUME")
    assert recheck.release() == ("scontrol", "delete", f"ReservationName={recheck.reservation}")


def test_a_gpu_to_be_replaced_is_drained_as_a_pending_remap_is() -> None:
    """health-row-remap escalates reset-gpu to contact-vendor when no spare rows are left: the
    worse GPU is drained too, not left in service."""
    for action in ("reset-gpu", "contact-vendor"):
        [step] = plan_drain([ecc(action=action)], {"h0002": OK}, {}, nodes(node("h0002")), RUN)
        assert step.verb == "drain", action
        assert step.reason.endswith(f"→ {action}, run {RUN}")
