"""The scripts a host runs for `fleet fabric`, sent like the probe bundle: the start-up alarm
(fleet/transport/launch.py), a literal, then a program read from the `probes` package. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fleet.shipped import fabric_folder
from fleet.transport.launch import with_alarm

RANK_FILE = "_fabric_rank.py"
RANK_ALARM_SLACK_S = 3  # the start-up alarm past the rank program's own deadline: a backstop

# What the controller needs to know before it places ranks: can this host's Python import torch,
# and how many GPUs does it have (CUDA_VISIBLE_DEVICES wins over the driver's list). Stdlib only.
DISCOVER_SOURCE = """\
import importlib.util, json, os, sys
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
try:
    driver = len(os.listdir("/proc/driver/nvidia/gpus"))
except OSError:
    driver = 0
gpus = len([d for d in visible.split(",") if d.strip()]) if visible is not None else driver
torch = importlib.util.find_spec("torch") is not None
print(json.dumps({"type": "discovered", "python": sys.version.split()[0],
                  "executable": sys.executable, "torch": torch, "gpus": gpus}))
"""


def rank_source() -> str:
    return fabric_folder().joinpath(RANK_FILE).read_text(encoding="utf-8")


def code_sha256() -> str:
    """Identifies the code a fabric run sent (the run's bundle_sha256)."""
    return hashlib.sha256((DISCOVER_SOURCE + "\0" + rank_source()).encode()).hexdigest()


def discover_script(deadline_s: float) -> bytes:
    return with_alarm(DISCOVER_SOURCE, deadline_s)


def rank_script(config: Mapping[str, Any], deadline_s: float, source: str | None = None) -> bytes:
    """The host's ranks of one group: `FABRIC = {...}` then the rank program. The alarm is a few
    seconds past the program's own deadline: a backstop for a program that cannot even clean up."""
    literal = json.dumps(json.dumps(dict(config), default=str))
    body = f"import json\nFABRIC = json.loads({literal})\n" + (source or rank_source())
    return with_alarm(body, deadline_s + RANK_ALARM_SLACK_S)


HOST_VARIABLE = "FLEET_HOST"  # set by a transport that launches several hosts with one script


def shared_rank_script(
    configs: Mapping[str, Mapping[str, Any]], deadline_s: float, source: str | None = None
) -> bytes:
    """One script for hosts launched together (one srun step reads one stdin): every host's
    config, and each host takes its own by the name the transport gives it in $FLEET_HOST."""
    literal = json.dumps(json.dumps({h: dict(c) for h, c in configs.items()}, default=str))
    head = f"import json, os\nFABRIC = json.loads({literal})[os.environ[{HOST_VARIABLE!r}]]\n"
    body = head + (source or rank_source())
    return with_alarm(body, deadline_s + RANK_ALARM_SLACK_S)
