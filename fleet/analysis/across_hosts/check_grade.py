"""Check-grade findings (rank 1 of fleet/analysis/across_hosts/findings.py): what breaks a job rather than
merely differs, said before anything else. Pure.

  - `arch`: hosts whose torch has no kernels for their GPUs (the torch probe's own judgement,
    `arch_supported`, which counts PTX it can JIT), one finding per cohort, torch and missing
    sm_XY; the arch facts that follow from it are accounted for by it;
  - `nccl`: NCCL transport settings (P2P, SHM, IB, NET, ALGO, PROTO, SOCKET_IFNAME, from the
    environment or an nccl.conf) that differ: inside a cohort, one finding per cohort and hosts
    with every key together; between cohorts, one per way of splitting the cohorts;
  - `import`: an import that resolves to another name (or to nothing), one finding per spec.

Each finder takes the in-cohort divergences and cross-cohort comparisons of fleet/analysis/
cohort_split.py and returns its findings with what is left for the lower ranks
(fleet/analysis/across_hosts/ranking.py).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from fleet.analysis.across_hosts.cohort_split import Splitter
from fleet.analysis.across_hosts.divergence import Divergence, SetDivergence
from fleet.analysis.across_hosts.findings import CHECK, CrossCohort, DivergenceFinding, fact_names
from fleet.analysis.facts import HostFacts, Value
from fleet.hostsets import compact_hosts

ARCH_FACT = re.compile(
    r"^torch\.(?:arch_list|devices\[\d+\]\.(?:arch_supported|arch_matched|ptx_fallback))$"
)
NCCL_TRANSPORT = re.compile(
    r'^nccl\.(?P<source>env|conf_files\."[^"]*")\.'
    r"(?P<key>NCCL_(?:P2P_\w+|SHM_\w+|IB_\w+|NET\w*|ALGO|PROTO|SOCKET_IFNAME))$"
)
IMPORT_RESOLVED = re.compile(r"^imports\.results\.(?P<spec>.+)\.resolved$")


def differs_on_arch(values: Sequence[Divergence], sets: Sequence[SetDivergence]) -> bool:
    return any(ARCH_FACT.match(i.fact) for i in values) or any(
        ARCH_FACT.match(s.fact) for s in sets
    )


class CheckGrade:
    """The check-grade finders, over one diff's cohorts."""

    def __init__(self, splitter: Splitter) -> None:
        self.splitter = splitter
        self.labels = splitter.labels
        self.hosts_of = splitter.hosts_of

    def arch_findings(
        self, inside: list[tuple[str, Divergence | SetDivergence]], crosses: list[CrossCohort]
    ) -> tuple[
        list[DivergenceFinding], list[tuple[str, Divergence | SetDivergence]], list[CrossCohort]
    ]:
        """Hosts whose torch has no kernels for their GPUs, by cohort, torch and missing sm_XY."""
        splitter = self.splitter
        bad: dict[tuple[str, Any, tuple[str, ...]], list[str]] = defaultdict(list)
        for key, hosts in splitter.members.items():
            missing = unsupported_arches(splitter.facts_of[key])
            if not missing:
                continue
            version = splitter.facts_of[key].values.get("torch.version")
            for host in hosts:
                if host in splitter.cohort_of:
                    bad[(splitter.cohort_of[host], version, missing)].append(host)
        bad_in: dict[str, set[str]] = defaultdict(set)
        for (where, _, _), members in bad.items():
            bad_in[where].update(members)
        whole = {c for c, hosts in bad_in.items() if len(hosts) == len(self.hosts_of[c])}
        covered = [
            (c, item)
            for c, item in inside
            if ARCH_FACT.match(item.fact) and set(item.differing_hosts) <= bad_in.get(c, set())
        ]
        covered_across = [
            x
            for x in crosses
            if ARCH_FACT.match(x.fact) and any(c in whole for pair in x.pairs for c in pair)
        ]
        findings = []
        for (cohort, version, missing), bad_hosts in bad.items():
            values = [i for c, i in covered if c == cohort and isinstance(i, Divergence)]
            names = [i for c, i in covered if c == cohort and isinstance(i, SetDivergence)]
            across = [x for x in covered_across if any(cohort in p for p in x.pairs)]
            facts = fact_names(values, names, across)
            if not facts:
                continue  # the same on every host of the fleet: not a divergence
            torch = f"torch {version}" if version else "torch"
            title = (
                f"{torch} cannot run on its GPUs: its arch list lacks {', '.join(missing)} "
                f"({self.labels[cohort]})"
            )
            findings.append(
                DivergenceFinding("arch", CHECK, title, tuple(sorted(bad_hosts)), cohort, facts,
                        tuple(values), tuple(names), tuple(across))
            )  # fmt: skip
        return findings, _without(inside, covered), [x for x in crosses if x not in covered_across]

    def keyed_findings(
        self,
        inside: list[tuple[str, Divergence | SetDivergence]],
        crosses: list[CrossCohort],
        kind: str,
    ) -> tuple[
        list[DivergenceFinding], list[tuple[str, Divergence | SetDivergence]], list[CrossCohort]
    ]:
        """NCCL transport settings (one finding per cohort and hosts, every key together) or
        import resolutions (one per spec)."""
        pattern = NCCL_TRANSPORT if kind == "nccl" else IMPORT_RESOLVED
        mine: list[tuple[str, Divergence | SetDivergence]] = [
            (c, i) for c, i in inside if isinstance(i, Divergence) and pattern.match(i.fact)
        ]
        alike: dict[tuple[Any, ...], list[Divergence]] = defaultdict(list)
        for cohort, item in mine:
            assert isinstance(item, Divergence)
            who = item.differing_hosts or item.hosts
            alike[(cohort, who, item.fact if kind == "import" else "")].append(item)
        findings = []
        for (cohort, who, _), items in alike.items():
            title = (
                self.nccl_title(items, cohort)
                if kind == "nccl"
                else self.import_title(items[0], cohort)
            )
            findings.append(
                DivergenceFinding(
                    kind, CHECK, title, who, cohort, fact_names(items, [], []), tuple(items)
                )
            )
        across = [x for x in crosses if pattern.match(x.fact) and x.software]
        together: dict[tuple[Any, ...], list[CrossCohort]] = defaultdict(list)
        for cross in across:
            together[(cross.partition, cross.fact if kind == "import" else "")].append(cross)
        for (_, _), items_across in together.items():
            title = self.across_title(items_across, kind)
            hosts = self.splitter.minority_hosts(items_across[0])
            findings.append(
                DivergenceFinding(kind, CHECK, title, hosts, None, fact_names([], [], items_across),
                        across=tuple(items_across))
            )  # fmt: skip
        return findings, _without(inside, mine), [x for x in crosses if x not in across]

    def nccl_title(self, items: Sequence[Divergence], cohort: str) -> str:
        label = self.labels[cohort]
        if items[0].split:
            parts = [
                f"{setting_key(i.fact)} "
                + ", ".join(f"{_setting(v)} on {compact_hosts(h)}" for v, h in i.groups)
                for i in items
            ]
            return f"NCCL transport settings split {label}: {'; '.join(parts)}"
        odd = []
        for item in items:
            key = setting_key(item.fact)
            if len(item.others) == 1:
                odd.append(f"{key}={_setting(item.others[0][0])}")
            else:
                odd.append(
                    f"{key} "
                    + ", ".join(f"{_setting(v)} on {compact_hosts(h)}" for v, h in item.others)
                )
        rest = {item.majority for item in items}
        if rest == {None}:
            usual = "unset"
        else:
            usual = ", ".join(f"{setting_key(i.fact)}={_setting(i.majority)}" for i in items)
        return f"NCCL transport settings differ: {', '.join(odd)} (the rest of {label}: {usual})"

    def import_title(self, item: Divergence, cohort: str) -> str:
        spec = import_spec(item.fact)
        label = self.labels[cohort]
        if item.split:
            sides = ", ".join(f"{_resolved(spec, v)} on {compact_hosts(h)}" for v, h in item.groups)
            return f"{spec} resolves differently in {label}: {sides}"
        if len(item.others) == 1:
            odd = item.others[0][0]
            verb = "does not import" if odd is None else f"resolves to {_resolved(spec, odd)}"
        else:
            verb = "resolves to " + ", ".join(
                f"{_resolved(spec, v)} on {compact_hosts(h)}" for v, h in item.others
            )
        return f"{spec} {verb} (the rest of {label}: {_resolved(spec, item.majority)})"

    def across_title(self, items: Sequence[CrossCohort], kind: str) -> str:
        if kind == "import":
            spec = import_spec(items[0].fact)
            sides = "; ".join(
                f"{_resolved(spec, v)} on {self.splitter.cohort_list(cs)}"
                for v, cs in items[0].groups
            )
            return f"{spec} resolves differently between cohorts: {sides}"
        parts = [
            f"{setting_key(x.fact)} "
            + "; ".join(f"{_setting(v)} on {self.splitter.cohort_list(cs)}" for v, cs in x.groups)
            for x in items
        ]
        return f"NCCL transport settings differ between cohorts: {'; '.join(parts)}"


def unsupported_arches(facts: HostFacts) -> tuple[str, ...]:
    """The sm_XY of a host's GPUs that its torch has no kernels for (the torch probe's own
    judgement, `arch_supported`, which counts PTX it can JIT)."""
    values = facts.values
    count = values.get("length(torch.devices)")
    missing = set()
    for index in range(count if isinstance(count, int) else 0):
        if values.get(f"torch.devices[{index}].arch_supported") is False:
            capability = str(values.get(f"torch.devices[{index}].capability") or "?")
            missing.add("sm_" + capability.replace(".", ""))
    return tuple(sorted(missing))


def setting_key(fact: str) -> str:
    """`nccl.env.NCCL_ALGO` → `NCCL_ALGO`; a conf file's setting names the file."""
    found = NCCL_TRANSPORT.match(fact)
    if not found:
        return fact
    source = found.group("source")
    if source == "env":
        return found.group("key")
    return f"{found.group('key')} ({json.loads(source.removeprefix('conf_files.'))})"


def import_spec(fact: str) -> str:
    found = IMPORT_RESOLVED.match(fact)
    spec = found.group("spec") if found else fact
    return str(json.loads(spec)) if spec.startswith('"') else spec


def _resolved(spec: str, value: Value) -> str:
    name = resolved_name(spec, value)
    return "nothing (it does not import)" if name is None else name


def resolved_name(spec: str, value: object) -> str | None:
    """An import's resolved name, without the module the spec already names (`mod:Alt` of
    `mod:Name|Alt` → `Alt`); None: nothing imported."""
    if value is None:
        return None
    module = spec.split(":", 1)[0] + ":"
    text = str(value)
    return text[len(module) :] if ":" in spec and text.startswith(module) else text


def _setting(value: Value) -> str:
    return "unset" if value is None else str(value)


def _without(
    inside: list[tuple[str, Divergence | SetDivergence]],
    taken: list[tuple[str, Divergence | SetDivergence]],
) -> list[tuple[str, Divergence | SetDivergence]]:
    gone = {(c, id(i)) for c, i in taken}
    return [(c, i) for c, i in inside if (c, id(i)) not in gone]
