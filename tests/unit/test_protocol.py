"""The runner's line protocol and how a host's one status is concluded."""

from __future__ import annotations

import json

import pytest

from fleet.execution.protocol import ExecResult, StreamDecoder, conclude


def lines(*messages: dict) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


HELLO = {"type": "hello", "protocol": 1, "python": "3.12.3"}
DONE = {"type": "done"}


def probe(name: str, status: str = "ok", **extra: object) -> dict:
    return {"type": "probe", "name": name, "status": status, "data": {}, "elapsed_s": 0.1, **extra}


def test_messages_split_across_chunks_are_reassembled() -> None:
    decoder = StreamDecoder()
    raw = lines(HELLO, probe("system"), DONE)
    for i in range(0, len(raw), 7):
        decoder.feed(raw[i : i + 7])
    assert decoder.hello
    assert decoder.done
    assert list(decoder.probes) == ["system"]


def test_noise_lines_are_kept_aside_not_fatal() -> None:
    decoder = StreamDecoder()
    decoder.feed(b"Welcome to the bastion!\n\xff\xfe\n" + lines(HELLO, DONE))
    assert decoder.done
    assert "Welcome" in decoder.noise


def test_output_cap_sets_truncated() -> None:
    decoder = StreamDecoder(limit_bytes=100)
    decoder.feed(b"x" * 101)
    assert decoder.truncated


def test_secrets_are_masked_again_on_the_controller() -> None:
    decoder = StreamDecoder()
    token = "hf_" + "A" * 34
    decoder.feed(lines(probe("nccl", data={"env": {"NCCL_X": token}}, error=f"Bearer {token}")))
    result = decoder.probes["nccl"]
    assert token not in json.dumps(result.to_dict())


def test_secrets_sent_with_json_escapes_or_deep_inside_are_masked_too() -> None:
    """The controller skips its walk only when no secret anchor occurs in the data's JSON text:
    escapes on the wire (an escaped underscore or slash) and non-ASCII neighbours hide none."""
    token = "hf_" + "B" * 34
    wire = (
        r'{"type": "probe", "name": "nccl", "status": "ok", "elapsed_s": 0.1, "data": '
        r'{"env": [{"\u2014hf\u005f' + "B" * 34 + r'": "https:\/\/bob:pw@example.org"}]}}'
    )
    decoder = StreamDecoder()
    decoder.feed(wire.encode() + b"\n")
    saved = json.dumps(decoder.probes["nccl"].to_dict(), ensure_ascii=False)
    assert "\\u005f" in wire
    assert token not in saved
    assert "bob:pw" not in saved


def test_clean_data_is_kept_as_sent() -> None:
    decoder = StreamDecoder()
    data = {"packages": {"torch": "2.9.1+cu128"}, "paths": ["/usr/lib", "C:\\x"], "n": 3}
    decoder.feed(lines(probe("packages", data=data)))
    assert decoder.probes["packages"].data == data


def conclude_from(raw: bytes, result: ExecResult | None, expected: list[str], **kw: object):
    decoder = StreamDecoder()
    decoder.feed(raw)
    return conclude(decoder, result, expected, python="python3", **kw)  # type: ignore[arg-type]


def test_all_probes_ok_or_absent_is_ok() -> None:
    verdict = conclude_from(
        lines(HELLO, probe("a"), probe("b", "absent"), DONE), ExecResult(0), ["a", "b"]
    )
    assert verdict.status == "ok"


def test_failed_probe_makes_the_host_partial() -> None:
    verdict = conclude_from(
        lines(HELLO, probe("a"), probe("b", "failed"), DONE), ExecResult(0), ["a", "b"]
    )
    assert verdict.status == "partial"
    assert verdict.error == "probe(s) failed: b"  # names the failed probe, not the one that passed


def test_runner_dying_midway_keeps_finished_probes_and_is_partial() -> None:
    verdict = conclude_from(lines(HELLO, probe("a")), ExecResult(None, "SIGKILL"), ["a", "b"])
    assert verdict.status == "partial"
    assert (verdict.error or "").startswith("the connection was lost before b")


def test_interpreter_not_found_is_no_python() -> None:
    verdict = conclude_from(
        b"", ExecResult(127, None, "sh: 1: /opt/venv/bin/python: not found"), ["a"]
    )
    assert verdict.status == "no_python"
    assert "python3 not found" in (verdict.error or "")


def test_python2_is_no_python_with_the_reason() -> None:
    verdict = conclude_from(b"", ExecResult(1, None, "SyntaxError: invalid syntax"), ["a"])
    assert verdict.status == "no_python"
    assert "SyntaxError" in (verdict.error or "")


def test_python_older_than_3_8_is_no_python_naming_the_version() -> None:
    old = {**HELLO, "python": "3.7.16"}
    verdict = conclude_from(lines(old, probe("a"), DONE), ExecResult(0), ["a"])
    assert verdict.status == "no_python"
    assert "Python 3.7.16" in (verdict.error or "")
    for fine in ("3.8.0", "3.13.0", "4.0.0", "unknown"):
        verdict = conclude_from(lines({**HELLO, "python": fine}, probe("a"), DONE),
                                ExecResult(0), ["a"])  # fmt: skip
        assert verdict.status == "ok", fine


def test_start_up_alarm_without_hello_is_timeout_not_no_python() -> None:
    verdict = conclude_from(b"", ExecResult(None, "SIGALRM"), ["a"], timeout_s=30)
    assert verdict.status == "timeout"
    assert "did not start" in (verdict.error or "")


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (ExecResult(None, "SIGALRM"), "within 7 s"),  # the script's own alarm
        (ExecResult(124), "within 9 s"),  # the host-side `timeout`, LAUNCH_GRACE_S later
        (ExecResult(None, "SIGKILL"), "within 9 s"),
        (None, "within 12 s"),  # the controller's --timeout
    ],
)
def test_a_hung_interpreter_is_said_with_the_deadline_that_ended_it(
    result: ExecResult | None, said: str
) -> None:
    verdict = conclude_from(
        b"", result, ["a"], timeout_s=12, start_up_s=7, timed_out=result is None
    )
    assert verdict.status == "timeout"
    assert f"python3 did not start the probes {said}" == verdict.error


def test_remote_deadline_is_timeout_naming_pending_probes() -> None:
    raw = lines(HELLO, probe("a"), {"type": "deadline", "pending": ["allreduce"]})
    verdict = conclude_from(raw, ExecResult(124), ["a", "allreduce"], timeout_s=60)
    assert verdict.status == "timeout"
    assert "allreduce" in (verdict.error or "")
