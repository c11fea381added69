"""The host runner's secret masking: token-shaped strings never leave the host.

A runner module (probes/runner/_host_runner.py, RUNNER_MODULES): it travels in every bundle and the
runner makes it importable by name before it imports it. The controller (fleet/redact.py) imports
this module too and masks again with the very same list. Stdlib only, Python 3.8+ (and it still
loads on 3.6/3.7, so that the runner can say it needs 3.8).
"""

import os
import re
from typing import Any, List, Mapping, Pattern

# Token-shaped strings never leave the host. The controller imports this list to mask again.
SECRET_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
# For each pattern, substrings of the lower-cased text without which it cannot match: a plain
# substring test is ~100x faster than the regex, so most strings are never searched at all.
SECRET_ANCHORS = (
    ("hf_",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("akia", "asia"),
    ("sk-",),
    ("xox",),
    ("bearer",),
    ("://",),
)
MASK = "***"
# Secrets with no telltale shape (WANDB_API_KEY, AWS_SECRET_ACCESS_KEY are plain hex/base64): the
# values of variables named like secrets are masked wherever they show up (an error message, a
# config dump), on the host that knows them.
SECRET_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)")


def environment_secrets(environ: Mapping[str, str]) -> List[str]:
    """Values of the variables named like secrets, longest first (8 characters or more)."""
    found = set(v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= 8)
    return sorted(found, key=len, reverse=True)


ENV_SECRETS = environment_secrets(os.environ)


def secret_patterns_in(text: str) -> List[Pattern[str]]:
    """The patterns whose anchor occurs in `text` (the only ones worth running)."""
    lowered = text.lower()
    return [
        p
        for p, anchors in zip(SECRET_PATTERNS, SECRET_ANCHORS)
        if any(a in lowered for a in anchors)
    ]


def mask_secrets(value: Any) -> Any:
    """Return `value` (any JSON-like structure) with every token-shaped substring replaced by ***."""
    if isinstance(value, str):
        if not value:  # most error, output and traceback fields: nothing to scan
            return value
        for secret in ENV_SECRETS:
            if secret in value:
                value = value.replace(secret, MASK)
        for pattern in secret_patterns_in(value):
            value = pattern.sub(MASK, value)
        return value
    if isinstance(value, dict):
        return {mask_secrets(k): mask_secrets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v) for v in value]
    return value
