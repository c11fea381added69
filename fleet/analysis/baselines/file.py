"""A baseline as a file: readable YAML a user commits beside the inventory (`fleet.baseline/1`,
fleet/schemas/baseline.schema.json), written here and read back with every mistake named at its
FILE:LINE with what to write instead. Pure (text in, text out).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from fleet.analysis.across_runs.bands import Band
from fleet.analysis.across_runs.measured import BANDWIDTH_FROM, Key
from fleet.analysis.baselines.build import (
    BASELINE_SCHEMA,
    Baseline,
    BaselineCohort,
    Gpu,
    MadeFrom,
)
from fleet.analysis.baselines.identity import VERSIONS
from fleet.errors import UsageError
from fleet.yamlfile import Location

REMAKE = "make it again: fleet baseline RUN [RUN…] -o FILE"
TOP_KEYS = ("schema", "fleet_version", "created", "band", "cohort_by", "runs", "cohorts")
COHORT_KEYS = ("label", "gpu", "hosts", "runs", "versions", "measurements")
BAND_KEYS = ("median", "low", "high", "n")
PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+/@-]*$")
HEADER = """\
# A fleet baseline: what known-good runs measured, per cohort of hosts (docs/documents.md).
# Judge a run against it:  fleet check --baseline-file FILE  (or fleet probe, diff, report)
# Each band is median ± max(floor × median, min(k × 1.4826 × MAD, spread + floor × median))
# over every host and run of the cohort, spread the farthest value's distance from the median;
# a host fails a measurement worse than its band (latency above, bus bandwidth below).
# Latency is kept below {small}, bus bandwidth from {small} up. Edit with care, or make it again.
"""


class BaselineFileError(UsageError):
    """A baseline file that cannot be used; the message starts with FILE:LINE (exit code 2)."""


# --------------------------------------------------------------------------------------- write


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:  # YAML 1.1 reads 1e-05 as text
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    text = str(value)
    if PLAIN.match(text) and yaml.safe_load(text) == text:
        return text
    return _quoted(text)


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _flow(mapping: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{_scalar(k)}: {_flow_value(v)}" for k, v in mapping.items()) + "}"


def _flow_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return _flow(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow_value(v) for v in value) + "]"
    return _scalar(value)


def baseline_text(baseline: Baseline) -> str:
    """The baseline as the YAML a person reads: one line per measurement."""
    small = "1 MiB" if BANDWIDTH_FROM == 1 << 20 else f"{BANDWIDTH_FROM} B"
    lines = [HEADER.format(small=small).rstrip("\n")]
    lines += [
        f"schema: {_scalar(BASELINE_SCHEMA)}",
        f"fleet_version: {_scalar(baseline.fleet_version)}",
        f"created: {_scalar(baseline.created)}",
        f"band: {_flow({'k': baseline.k, 'floor': baseline.floor})}",
        f"cohort_by: {_scalar(baseline.cohort_by)}",
        "runs:",
    ]
    for made in baseline.runs:
        lines.append(
            "  - "
            + _flow(
                {
                    "location": made.location,
                    "started": made.started,
                    "inventory": made.inventory,
                    "fleet_version": made.fleet_version,
                    "hosts": made.hosts,
                }
            )
        )
    lines.append("cohorts:")
    for name, cohort in baseline.cohorts.items():
        lines += [
            f"  {_scalar(name)}:",
            f"    label: {_scalar(cohort.label)}",
            f"    gpu: {_flow(cohort.gpu.to_dict()) if cohort.gpu else 'null'}",
            f"    hosts: {_flow_value(list(cohort.hosts))}",
            f"    runs: {cohort.runs}",
            f"    versions: {_flow({v: list(cohort.versions.get(v, ())) for v in VERSIONS})}",
            "    measurements:",
        ]
        for key, band in cohort.bands.items():
            entry = {"median": band.median, "low": band.low, "high": band.high, "n": band.samples}
            lines.append(f"      {_scalar(key.name)}: {_flow(entry)}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- read


def parse_baseline(text: str, path: str) -> Baseline:
    """The baseline in `text` (read from `path`, for messages), validated."""
    where = Location(path, BaselineFileError)
    document = where.parse(
        text, hint=f"check the indentation and quoting near that line, or {REMAKE}"
    )
    if not isinstance(document, dict):
        raise where.fail("a baseline is a mapping (schema:, band:, cohorts:, …)", hint=REMAKE)
    _known_keys(document, TOP_KEYS, where, "at the top level")
    schema = document.get("schema")
    if schema != BASELINE_SCHEMA:
        raise where.at(document, "schema" if "schema" in document else None).fail(
            f"schema {schema!r} is not {BASELINE_SCHEMA}",
            hint="a newer fleet made it: upgrade fleet"
            if isinstance(schema, str) and schema.startswith("fleet.baseline/")
            else f"is this a baseline? {REMAKE}",
        )
    band = _mapping(document, "band", where)
    _known_keys(band, ("k", "floor"), where.at(document, "band"), "in band:")
    k = _number(band, "k", where.at(document, "band"), positive=True)
    floor = _number(band, "floor", where.at(document, "band"))
    cohort_by = document.get("cohort_by")
    if cohort_by is not None and not isinstance(cohort_by, str):
        raise where.at(document, "cohort_by").fail("cohort_by: is a JMESPath text or null")
    cohorts_raw = _mapping(document, "cohorts", where)
    if not cohorts_raw:
        raise where.at(document, "cohorts").fail("cohorts: is empty: nothing to judge against",
                                                 hint=REMAKE)  # fmt: skip
    cohorts: dict[str, BaselineCohort] = {}
    lines: dict[str, int] = {}
    for name, raw in cohorts_raw.items():
        here = where.at(cohorts_raw, name).about(f"cohort {name!r}: ")
        cohorts[str(name)] = _cohort(str(name), raw, here)
        lines[str(name)] = here.line
    return Baseline(
        fleet_version=str(document.get("fleet_version", "?")),
        created=str(document.get("created", "")),
        k=k,
        floor=floor,
        cohort_by=cohort_by,
        runs=_runs(document.get("runs"), where.at(document, "runs")),
        cohorts=cohorts,
        path=path,
        lines=lines,
    )


def _known_keys(
    raw: Mapping[Any, Any], allowed: tuple[str, ...], where: Location, what: str
) -> None:
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise where.at(raw, unknown[0]).fail(
            f"unknown key {unknown[0]!r} {what}", hint=f"allowed: {', '.join(allowed)}"
        )


def _mapping(raw: Mapping[Any, Any], key: str, where: Location) -> Mapping[Any, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise where.at(raw, key if key in raw else None).fail(
            f"{key}: is missing or not a mapping", hint=REMAKE
        )
    return value


def _number(raw: Mapping[Any, Any], key: str, where: Location, positive: bool = False) -> float:
    value = raw.get(key)
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise where.at(raw, key if key in raw else None).fail(
            f"{key}: {value!r} is not a {'positive' if positive else 'non-negative'} number",
            hint=f"e.g. {key}: {3.0 if key == 'k' else 0.1}",
        )
    return float(number)


def _runs(raw: Any, where: Location) -> tuple[MadeFrom, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise where.fail("runs: is a list of the runs the baseline was made from", hint=REMAKE)
    made = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise where.fail("each of runs: is a mapping (location:, started:, …)", hint=REMAKE)
        hosts = entry.get("hosts")
        made.append(
            MadeFrom(
                location=str(entry.get("location", "?")),
                started=str(entry.get("started", "?")),
                inventory=None if entry.get("inventory") is None else str(entry["inventory"]),
                fleet_version=str(entry.get("fleet_version", "?")),
                hosts=hosts if type(hosts) is int else 0,
            )
        )
    return tuple(made)


def _cohort(name: str, raw: Any, where: Location) -> BaselineCohort:
    if not isinstance(raw, dict):
        raise where.fail("a cohort is a mapping (label:, hosts:, versions:, measurements:)")
    where = where.at(raw)
    _known_keys(raw, COHORT_KEYS, where, "")
    measurements = _mapping(raw, "measurements", where)
    bands: dict[Key, Band] = {}
    for measurement, entry in measurements.items():
        here = where.at(measurements, measurement)
        key = Key.parse(measurement) if isinstance(measurement, str) else None
        if key is None:
            raise here.fail(
                f"{measurement!r} is not a measurement fleet takes",
                hint="e.g. 'allreduce graph 8 B latency_us', 'allreduce eager 256 MiB busbw_gbps',"
                " 'allreduce-matrix nccl:Ring/LL graph 8 B latency_us', "
                "'fabric nccl 256 MiB busbw_gbps'",
            )
        bands[key] = _band(measurement, entry, here)
    versions = raw.get("versions") or {}
    if not isinstance(versions, dict):
        raise where.at(raw, "versions").fail(
            "versions: is a mapping (torch:, cuda:, nccl:, driver:)"
        )
    return BaselineCohort(
        name=name,
        label=str(raw.get("label") or name),
        gpu=_gpu(raw.get("gpu"), where.at(raw, "gpu")),
        hosts=tuple(str(h) for h in raw.get("hosts") or ()),
        runs=raw["runs"] if type(raw.get("runs")) is int else 0,
        versions={v: _texts(versions.get(v)) for v in VERSIONS},
        bands=bands,
    )


def _texts(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in (value if isinstance(value, list) else [value]))


def _gpu(raw: Any, where: Location) -> Gpu | None:
    if raw is None:
        return None
    model, count = (raw.get("model"), raw.get("count")) if isinstance(raw, dict) else (None, None)
    if not isinstance(model, str) or type(count) is not int:
        raise where.fail(
            "gpu: is {model: NAME, count: N, interconnect: nvlink|pcie|null}, or null",
            hint=REMAKE,
        )
    link = raw.get("interconnect")
    return Gpu(model, count, None if link is None else str(link))


def _band(name: str, raw: Any, where: Location) -> Band:
    example = "{median: 12.6, low: 8.8, high: 16.4, n: 3}"
    if not isinstance(raw, dict):
        raise where.fail(f"{name!r} is {example}, not {raw!r}", hint=REMAKE)
    _known_keys(raw, BAND_KEYS, where, f"in {name!r}")
    missing = [k for k in BAND_KEYS if k not in raw]
    if missing:
        raise where.fail(f"{name!r} lacks {', '.join(missing)}", hint=f"write it as {example}")
    median, low, high = (_number(raw, k, where) for k in ("median", "low", "high"))
    count = raw["n"]
    if type(count) is not int or count < 1:
        raise where.fail(f"{name!r}: n: {count!r} is not a count of values (1 or more)")
    if not low <= median <= high:
        raise where.fail(
            f"{name!r}: low {low:g} ≤ median {median:g} ≤ high {high:g} does not hold",
            hint="put the band's low end first, then the median, then the high end",
        )
    return Band(median, low, high, count)
