"""Secrets in the remote environment appear in no output, saved run, log or traceback.

Besides the variables themselves, a module on the host's PYTHONPATH fails to import with the
secrets in its error message (libraries do print their configuration), and an allow-listed
NCCL_* variable carries one: the probes report both, masked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import inventory_for
from tests.integration.conftest import run_fleet
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.faults

SECRETS = {
    "HF_TOKEN": "hf_" + "Q7rT2" * 7,
    "WANDB_API_KEY": "3f9a2c" * 6 + "d41e",  # 40 hex characters, no telltale prefix
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    "HTTPS_PROXY": "http://alice:s3cr3t-pa55w0rd@proxy.internal:3128",
}
LEAKY_MODULE = """
import os
raise RuntimeError("bad config: wandb=%s aws=%s proxy=%s hf=%s" % (
    os.environ["WANDB_API_KEY"], os.environ["AWS_SECRET_ACCESS_KEY"],
    os.environ["HTTPS_PROXY"], os.environ["HF_TOKEN"]))
"""


def secret_parts() -> list[str]:
    return [*SECRETS.values(), "s3cr3t-pa55w0rd"]


def test_remote_secrets_never_leave_the_host(
    farm: SshdFarm, tmp_path: Path, fresh_host: Any
) -> None:
    stub = tmp_path / "leaky"
    stub.mkdir()
    (stub / "leaky_config.py").write_text(LEAKY_MODULE)
    env = {**SECRETS, "NCCL_DEBUG_SUBSYS": SECRETS["WANDB_API_KEY"], "PYTHONPATH": str(stub)}
    name = fresh_host("secrets", env)
    inventory = inventory_for(farm, tmp_path, [name])

    result = run_fleet(
        tmp_path, "probe", "-i", str(inventory), "-p", "system,imports,nccl",
        "--import", "leaky_config:X",
    )  # fmt: skip

    host = result.host(name)
    assert host["status"] in ("ok", "partial"), host
    imports = json.dumps(host["probes"]["imports"])
    assert "bad config" in imports
    assert "***" in imports
    assert host["probes"]["nccl"]["data"]["env"]["NCCL_DEBUG_SUBSYS"] == "***"
    everything = [result.stdout, result.stderr, json.dumps(result.document)]
    everything += [p.read_text() for p in result.state_dir.rglob("*") if p.is_file()]
    for text in everything:
        for secret in secret_parts():
            assert secret not in text
    assert not (stub / "__pycache__").exists(), "the host's module folder was written to"
