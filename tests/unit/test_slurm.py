"""Slurm targets, sinfo states, the srun command line and the step's demultiplexing, without Slurm
(the real cluster is tests/slurm/)."""

from __future__ import annotations

import asyncio
import zlib
from pathlib import Path

import pytest

from fleet.errors import UnreachableError, UsageError
from fleet.inventory.slurm import (
    SlurmCluster,
    SlurmNode,
    SlurmTarget,
    discover,
    node_from_state,
    parse_sinfo,
    parse_target,
    require_overlap,
    slurm_host,
)
from fleet.transport.launch import ZLIB_LAUNCH_ARGS, with_alarm
from fleet.transport.slurm import (
    NodeStream,
    SlurmOptions,
    SlurmStep,
    SlurmTransport,
    exit_result,
    gpu_request,
    parse_slurm_args,
    srun_argv,
)
from tests.runner.helpers import load_runner


def test_targets_parse_and_bad_ones_name_the_valid_forms() -> None:
    assert parse_target("partition=gpu") == SlurmTarget("partition", "gpu")
    assert parse_target(" nodes=gpu-[01-04],cpu-1 ").value == "gpu-[01-04],cpu-1"
    assert parse_target("job=1234_7").kind == "job"
    for bad in ("gpu", "queue=gpu", "job=abc", "partition=a;rm", "nodes=gpu-[1-", "nodes=a b"):
        with pytest.raises(UsageError) as caught:
            parse_target(bad)
        assert bad.split("=")[-1] in caught.value.message or "Slurm target" in caught.value.message


@pytest.mark.parametrize(
    ("state", "usable"),
    [
        ("idle", True),
        ("mixed", True),
        ("allocated", True),
        ("mixed-", True),
        ("drained", False),
        ("draining", False),
        ("down*", False),
        ("idle*", False),
        ("idle~", False),
        ("fail", False),
        ("reboot^", False),
    ],
)
def test_sinfo_states_say_which_nodes_are_usable(state: str, usable: bool) -> None:
    assert node_from_state("n1", state, "none").usable is usable


def test_sinfo_lines_keep_reasons_whole_and_nodes_once() -> None:
    text = "a|idle|10.0.0.1|none\nb|drained|b|bad DIMM | slot 3\na|idle|10.0.0.1|none\n"
    assert parse_sinfo(text) == [
        SlurmNode("a", "idle", None, True, "10.0.0.1"),
        SlurmNode("b", "drained", "bad DIMM | slot 3", False, "b"),
    ]


def fake_slurm(replies: dict[str, str]):
    def run(argv):
        return replies[argv[0]]

    return run


def test_a_job_that_is_not_running_has_no_nodes_to_probe() -> None:
    run = fake_slurm({"srun": "slurm 22.05.8", "squeue": "PENDING|\n"})
    with pytest.raises(UsageError, match="pending"):
        discover(SlurmTarget("job", "12"), run)


def test_a_draining_node_that_holds_the_job_is_usable_inside_it() -> None:
    run = fake_slurm(
        {
            "srun": "slurm 22.05.8",
            "squeue": "RUNNING|n[1-2]\n",
            "scontrol": "n1\nn2\n",
            "sinfo": "n1|draining|n1|maintenance\nn2|down*|n2|Not responding\n",
        }
    )
    cluster = discover(SlurmTarget("job", "12"), run)
    assert [n.usable for n in cluster.nodes] == [True, False]
    assert cluster.job_id == "12"


def test_too_old_a_slurm_for_overlap_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match=r"20\.11"):
        require_overlap(fake_slurm({"srun": "slurm 20.02.7\n"}))


def test_unknown_nodes_are_named() -> None:
    run = fake_slurm({"sinfo": "gpu-01|idle|gpu-01|none\n"})
    with pytest.raises(UsageError, match=r"gpu-\[02-03\]"):
        discover(SlurmTarget("nodes", "gpu-[01-03]"), run)


def test_srun_line_one_task_per_node_site_args_last() -> None:
    cluster = SlurmCluster(SlurmTarget("partition", "gpu"), [SlurmNode("gpu-01", "idle")])
    options = SlurmOptions(extra_args=parse_slurm_args("--account=a --comment='x y'"))
    argv = srun_argv(cluster, ["gpu-01", "gpu-02", "gpu-04"], "python3", options)
    assert "--nodelist=gpu-[01-02,04]" in argv
    assert "--ntasks-per-node=1" in argv
    assert "--exclusive" in argv
    assert "--label" in argv
    assert "--input=all" in argv
    assert argv.index("--comment=x y") < argv.index("/bin/sh")
    assert argv[-4:] == ["python3", *ZLIB_LAUNCH_ARGS]  # the launcher of a compressed script
    in_job = SlurmCluster(SlurmTarget("job", "7"), [], job_id="7")
    job_argv = srun_argv(in_job, ["gpu-01"], "python3", SlurmOptions())
    assert job_argv[1:4] == ["--jobid", "7", "--overlap"]
    assert "--exclusive" not in job_argv


def test_srun_gets_the_script_compressed_after_its_alarm_line(tmp_path: Path) -> None:
    """srun copies its stdin to every node: the body goes compressed (ZLIB_LAUNCHER's input)."""
    fake_srun = tmp_path / "srun"
    fake_srun.write_text(f"#!/bin/sh\ncat > {tmp_path / 'stdin'}\n")
    fake_srun.chmod(0o755)
    cluster = SlurmCluster(SlurmTarget("partition", "gpu"), [SlurmNode("gpu-01", "idle")])
    script = with_alarm("print('x' * 1000)\n", 30)

    async def scenario() -> None:
        # built inside the loop, as fleet does: on Python 3.9 its asyncio.Lock binds a loop
        options = SlurmOptions(srun=str(fake_srun))
        transport = SlurmTransport(cluster, [slurm_host("gpu-01")], options)
        with pytest.raises(UnreachableError, match="sent nothing"):  # the fake says nothing
            await transport.execute(slurm_host("gpu-01"), script, lambda chunk: True)
        await transport.close()

    asyncio.run(scenario())
    head, body = (tmp_path / "stdin").read_bytes().split(b"\n", 1)
    assert head + b"\n" + zlib.decompress(body) == script


def test_gpu_requests() -> None:
    assert gpu_request("4", in_job=False) == ["--gpus-per-node=4"]
    assert gpu_request("none", in_job=False) == []
    with pytest.raises(UsageError):
        gpu_request("all", in_job=False)


def runner_fold():
    return load_runner().fold


@pytest.mark.parametrize("ticks", ["on-change", ""])
def test_on_slurm_a_tick_that_repeats_the_last_one_is_not_written(
    ticks: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEET_TICKS", ticks)  # the Slurm wrapper sets "on-change"
    runner = load_runner()  # a fresh module: it reads FLEET_* from the environment on import
    for running in (["a", "b"], ["a", "b"], ["b"], ["b"], ["b"]):
        runner.emit({"type": "tick", "running": running})
    runner.emit({"type": "done", "elapsed_s": 1.0})
    lines = capfd.readouterr().out.splitlines()
    if ticks:
        assert lines == [
            '{"running": ["a", "b"], "type": "tick"}',
            '{"running": ["b"], "type": "tick"}',
            '{"elapsed_s": 1.0, "type": "done"}',
        ]
    else:  # over SSH, and run by hand: every tick, as before
        assert len(lines) == 6


def test_folded_lines_are_joined_again_and_buffered_until_a_sink_attaches() -> None:
    async def scenario() -> list[bytes]:
        stream = NodeStream("n1", asyncio.get_running_loop().create_future())
        line = b'{"type": "probe", "data": "' + b"x" * 5000 + b'"}\n'
        for piece in runner_fold()(line, 1000).splitlines():
            stream.stdout_line(piece)  # as srun hands them over, label removed
        got: list[bytes] = []
        stream.attach(lambda chunk: got.append(chunk) is None)
        stream.stdout_line(b'{"type": "done"}')
        return got

    got = asyncio.run(scenario())
    assert got[0] == b'{"type": "probe", "data": "' + b"x" * 5000 + b'"}\n'
    assert got[1] == b'{"type": "done"}\n'


def test_labelled_lines_go_to_their_node_and_silent_nodes_are_errors() -> None:
    async def scenario():
        step = SlurmStep(["srun"], ["n1", "n2"], SlurmOptions())
        got: list[bytes] = []
        step._line(b"1: early line", stdout=True)  # before n1's start line: kept for it
        step._line(b"1: \x1dstart n1 55 0", stdout=True)
        step.streams["n1"].attach(lambda chunk: got.append(chunk) is None)
        step._line(b"1: \x1dexit 137", stdout=True)
        step._line(b"1: Killed", stdout=False)
        step._line(b"1: \x1dexit 137", stdout=False)
        step._line(b"srun: error: n2: task 0: launch failed", stdout=False)
        step._conclude_unfinished()
        return got, await step.streams["n1"].ended, step.streams["n2"].ended, step

    got, result, silent, step = asyncio.run(scenario())
    assert got == [b"early line\n"]
    assert step.job_id == "55"
    assert result.exit_signal == "SIGKILL"
    assert "Killed" in result.stderr_tail
    with pytest.raises(UnreachableError, match="n2 sent nothing"):
        silent.result()


@pytest.mark.parametrize("all_ended", [True, False])
def test_srun_ends_by_itself_once_every_task_said_how_it_ended(all_ended: bool) -> None:
    """Interrupting srun cancels the step: only when a node is still running (given up)."""
    fake_srun = (
        "trap 'echo interrupted >&2; exit 130' INT; echo ready >&2; sleep 1; "
        "echo ended by itself >&2"
    )

    async def scenario() -> list[str]:
        step = SlurmStep(["sh", "-c", fake_srun], ["n1", "n2"], SlurmOptions())
        await step.start(b"")
        for _ in range(600):  # until the shell has set its trap
            if step.srun_messages:
                break
            await asyncio.sleep(0.05)
        for stream in step.streams.values():
            stream.exit_marks = 2 if all_ended else 1
        await step.stop()
        await step.done
        return step.srun_messages

    expected = "ended by itself" if all_ended else "interrupted"
    assert asyncio.run(scenario()) == ["ready", expected]


def test_wrapper_exit_status_maps_signals() -> None:
    assert exit_result(0, "").exit_status == 0
    assert exit_result(142, "").exit_signal == "SIGALRM"
    assert exit_result(127, "sh: python3: not found").exit_status == 127


def test_gpu_visibility_says_when_the_task_sees_fewer_gpus_than_the_node_has() -> None:
    from probes.gpu import gpu_visibility

    seen = gpu_visibility(2, {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "4,5"}, 8)
    assert seen == {
        "task_gpus": 2,
        "node_gpus": 8,
        "cuda_visible_devices": "0,1",
        "slurm_gpus": "4,5",
        "restricted": True,
    }
    assert gpu_visibility(8, {}, None)["restricted"] is False


def test_an_exit_mark_after_an_unterminated_last_line_ends_that_line() -> None:
    """The wrapper's `exit` marks start no line of their own (one message fewer for srun): after a
    last line with no newline they arrive on it, and the line still reaches its stream."""

    async def scenario():
        step = SlurmStep(["srun"], ["n1"], SlurmOptions())
        got: list[bytes] = []
        step._line(b"0: \x1dstart n1 55 0", stdout=True)
        step.streams["n1"].attach(lambda chunk: got.append(chunk) is None)
        step._line(b'0: {"type": "done"}', stdout=True)
        step._line(b"0: half a line\x1dexit 1", stdout=True)
        step._line(b"0: Traceback ends here\x1dexit 1", stdout=False)
        return got, await step.streams["n1"].ended

    got, result = asyncio.run(scenario())
    assert got == [b'{"type": "done"}\n', b"half a line\n"]
    assert result.exit_status == 1
    assert result.stderr_tail.endswith("Traceback ends here\n")


def test_the_step_is_stopped_once_every_node_is_released_and_only_then() -> None:
    """Each host's end releases its node (counted: a set comparison per host was quadratic);
    a node released twice, or one that is not in the step, does not count towards the end."""

    async def scenario() -> list[bool]:
        nodes = [SlurmNode(n, "idle") for n in ("n1", "n2")]
        cluster = SlurmCluster(SlurmTarget("partition", "gpu"), nodes)
        transport = SlurmTransport(cluster, [slurm_host(n.name) for n in nodes], SlurmOptions())
        transport.step = SlurmStep(["srun"], ["n1", "n2"], SlurmOptions())
        stopping = []
        for name in ("n1", "n1", "unknown", "n2"):
            transport._release(name)
            stopping.append(transport._stopping is not None)
        await transport.close()
        return stopping

    assert asyncio.run(scenario()) == [False, False, False, True]


def test_a_started_task_that_srun_lost_before_its_first_line_is_unreachable() -> None:
    """srun gave up on the step (its own words on stderr): a task that started but wrote nothing
    is unreachable, not a Python that could not run the probes; one that had written keeps it."""

    async def scenario():
        step = SlurmStep(["srun"], ["n1", "n2"], SlurmOptions())
        step._line(b"0: \x1dstart n1 55 0", stdout=True)
        step._line(b"1: \x1dstart n2 55 0", stdout=True)
        step._line(b'1: {"type": "hello", "protocol": 1}', stdout=True)
        step._line(b"srun: error: eio_handle_mainloop: Abandoning IO", stdout=False)
        step._conclude_unfinished()
        return step.streams["n1"].ended, await step.streams["n2"].ended

    lost, written = asyncio.run(scenario())
    with pytest.raises(UnreachableError, match="lost n1: the Slurm step ended") as error:
        lost.result()
    assert "Abandoning IO" in (error.value.context or "")
    assert written.exit_status is None
    assert "Abandoning IO" in written.stderr_tail
