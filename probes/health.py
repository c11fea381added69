"""GPU and link health: ECC, row remapping, clock-event reasons, thermals, PCIe, NVLink, fabric, XIDs, IOMMU/ACS."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import _fabric_manager
import _health_sample
import _host_io
import _kernel_log
import _pcie
from _nvidia_smi import HEALTH_QUERY_ARGS, parse_query_health
from _nvidia_smi_xml import parse_smi_xml
from _nvlink import nvlink_for_gpu, parse_nvlink_errors, parse_nvlink_status

TIMEOUT_S = 30
# How the controller compares this probe's fields across hosts (fleet/analysis/facts.py).
# Counts (ECC, remapped rows, XIDs), link state, modes and limits are facts: a host that differs
# from its twins there is the news. Readings that move with load are volatile: temperatures, power
# draw, the current SM clock and PCIe generation (both drop at idle), which clock-event reasons
# are active right now (idle comes and goes), the throttle counters, and the log lines' times.
# The sample (--sample SECONDS: counters read twice) is volatile: its changes and rates are
# readings of that moment, judged by the rules, never compared between hosts. Bus ids are per
# slot (identity); which GPUs are missing from nvidia-smi, the fabric manager's state, are facts.
FACTS = {
    "identity": [
        "pci_bus.gpus",
        "fabric_manager.nvswitch_bus_ids",
        "gpus[*].uuid",
        "gpus[*].pci_bus_id",
        "gpus[*].gpu",
        "gpus[*].serial",
        "kernel_log.xids[*].gpu",
        "kernel_log.xids[*].pci",
        "kernel_log.sxids[*].pci",
        "acs.bridges[*].bridge",
        "acs.bridges[*].gpus",
        "iommu.gpu_groups.*",
    ],
    "volatile": [
        "gpus[*].temperature.gpu_c",
        "gpus[*].temperature.memory_c",
        "gpus[*].temperature.tlimit_c",
        "gpus[*].temperature.slowdown_margin_c",
        "gpus[*].temperature.shutdown_margin_c",
        "gpus[*].power.draw_w",
        "gpus[*].clocks.sm_mhz",
        "gpus[*].pcie.gen",
        "gpus[*].performance_state",
        "gpus[*].clock_events.active",
        "gpus[*].clock_events.mask",
        "gpus[*].clock_events.counters_us.*",
        "kernel_log.xids[*].time",
        "kernel_log.xids[*].uptime_s",
        "kernel_log.xids[*].text",
        "kernel_log.sxids[*].time",
        "kernel_log.sxids[*].uptime_s",
        "kernel_log.sxids[*].text",
        "kernel_log.tried",
        "sample",
        "sample.*",
        "fabric_manager.service_why",
        "command_errors",
        "timings_s",
        "timings_s.*",
    ],
    # what the machine is (its GPU model, board and system): unlike between cohorts by nature,
    # compared inside a cohort like any fact (fleet/analysis/across_hosts/findings.py)
    "hardware": [
        "pci_bus.gpu_count",
        "interconnect",
        "fabric_manager.nvswitches",
        "gpu_count",
        "gpus",
        "gpus[*].name",
        "gpus[*].vbios",
        "gpus[*].power.limit_w",
        "gpus[*].ecc.mode",
        "gpus[*].ecc.pending_mode",
        "gpus[*].clocks.sm_max_mhz",
        "gpus[*].pcie.gen_max",
        "gpus[*].pcie.width_max",
        "gpus[*].temperature.shutdown_c",
        "gpus[*].temperature.slowdown_c",
        "gpus[*].nvlink.links",
        "gpus[*].nvlink.speeds_gbs",
        "gpus[*].fabric.*",
    ],
}

# The helpers this probe imports, shipped beside it (the runner serves them by module name).
SHIPS = (
    "_nvidia_smi.py",
    "_nvidia_smi_xml.py",
    "_nvlink.py",
    "_kernel_log.py",
    "_pcie.py",
    "_host_io.py",
    "_health_sample.py",
    "_fabric_manager.py",
)

COMMAND_TIMEOUT_S = 10.0
XML_ARGS = ("-q", "-x")
NVLINK_STATUS_ARGS = ("nvlink", "-s")
NVLINK_ERRORS_ARGS = ("nvlink", "-e")
ROOT = "/"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_CMDLINE = "/proc/cmdline"
SYS_MODULES = "/sys/module"
MODULE_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")
NVML_LIB_VERSION = re.compile(r"NVML library version:\s*(\d+(?:\.\d+)+)")
EXCERPT = 200
SMI_SOURCE = "nvidia-smi -q -x"  # the sources of the sample's reads (_health_sample.SOURCES)
NVLINK_SOURCE = "nvidia-smi nvlink -e"
Outcomes = Dict[Tuple[str, ...], Tuple[Optional[int], str, str]]  # as _host_io.finish says


def command_timeout(options: Dict[str, Any]) -> float:
    """Each nvidia-smi command's timeout: the option `command_timeout_s`. `timeout_s` is the
    probe's own deadline to the runner; before issue 47 this probe read it as the command
    timeout too, so an inventory's probe_args that says only `timeout_s` still sets it."""
    return float(options.get("command_timeout_s", options.get("timeout_s", COMMAND_TIMEOUT_S)))


# ---------------------------------------------------------------- kernel module and driver


def parse_module_version(text: Optional[str]) -> Dict[str, Any]:
    """/proc/driver/nvidia/version -> the kernel module's flavour (open / proprietary) and version."""
    if not text or not text.strip():
        return {"flavour": None, "version": None, "banner": None}
    first = text.strip().splitlines()[0]
    match = MODULE_VERSION.search(first)
    return {
        "flavour": "open" if "Open Kernel Module" in first else "proprietary",
        "version": match.group(1) if match else None,
        "banner": " ".join(first.split())[:EXCERPT],
    }


def driver_versions(
    smi_version: Optional[str], module: Mapping[str, Any], smi_error: Optional[str]
) -> Dict[str, Any]:
    """nvidia-smi's (NVML's) driver version against the loaded kernel module's."""
    nvml = smi_version
    if nvml is None and smi_error:
        match = NVML_LIB_VERSION.search(smi_error)
        nvml = match.group(1) if match else None
    kernel = module.get("version")
    match_: Optional[bool] = None
    if nvml and kernel:
        match_ = nvml == kernel
    elif smi_error and "version mismatch" in smi_error.lower():
        match_ = False
    return {"nvidia_smi": nvml, "kernel_module": kernel, "versions_match": match_}


def _dma_buf(module: Mapping[str, Any], kernel_dma_buf: Optional[bool]) -> Optional[bool]:
    """GPUDirect RDMA through dma-buf needs the open kernel module and a kernel with dma-buf."""
    if module.get("flavour") is None:
        return None
    if module["flavour"] != "open":
        return False
    return kernel_dma_buf


# ---------------------------------------------------------------- the probe's data


def build_data(
    xml_text: Optional[str],
    nvlink_status: Optional[str],
    nvlink_errors: Optional[str],
    module_text: Optional[str],
    kernel_log: _kernel_log.KernelLog = (None, None, {}),
    host: Optional[Mapping[str, Any]] = None,
    query_text: Optional[str] = None,
    smi_error: Optional[str] = None,
) -> Dict[str, Any]:
    """The probe's `data` from its commands' outputs (None: that command gave nothing) and the
    host facts collect() read from /proc and /sys (`host`: cmdline, iommu groups and types,
    ACS readings, loaded modules, GPUs on the PCI bus)."""
    host = host or {}
    errors: Dict[str, str] = {}
    smi = _smi_facts(xml_text, query_text, errors)
    gpus = smi["gpus"]
    status = parse_nvlink_status(nvlink_status) if nvlink_status is not None else None
    counters = parse_nvlink_errors(nvlink_errors) if nvlink_errors is not None else None
    for gpu in gpus:
        gpu["nvlink"] = nvlink_for_gpu(gpu, status, counters)
    module = parse_module_version(module_text)
    source, log_text, tried = kernel_log
    scan = host.get("pci_scan")
    return {
        "nvidia_smi_error": smi_error,
        "driver_version": smi["driver_version"],
        "cuda_version": smi["cuda_version"],
        "gpu_count": len(gpus),
        "gpus_on_pci_bus": host.get("pci_gpus"),
        "pci_bus": pci_bus(scan, gpus),
        "interconnect": interconnect(gpus, status),
        "fabric_manager": host.get("fabric_manager")
        or _fabric_manager.fabric_manager(scan["nvswitches"] if scan else None, None, None),
        "sample": None,
        "gpus": gpus,
        "kernel_module": module,
        "driver": driver_versions(smi["driver_version"], module, smi_error),
        "kernel_log": _kernel_log.kernel_log_result(source, log_text, dict(tried), gpus),
        "iommu": _iommu(host),
        "acs": _pcie.acs_summary(_gpu_bridges(gpus, host), host.get("acs") or {}),
        "peermem": {
            "nvidia_peermem_loaded": host.get("nvidia_peermem"),
            "kernel_dma_buf": host.get("kernel_dma_buf"),
            "dma_buf_possible": _dma_buf(module, host.get("kernel_dma_buf")),
        },
        "command_errors": errors,
    }


def pci_bus(scan: Optional[Mapping[str, List[str]]], gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The NVIDIA GPUs on the PCI bus against those nvidia-smi lists, by bus id: a GPU that fell
    off the bus, or that the driver failed to bring up, is on the bus and not in nvidia-smi's
    list. None where the bus could not be read."""
    if scan is None:
        return {"gpus": None, "gpu_count": None, "missing_from_nvidia_smi": None}
    listed = set(_pcie.bus_key(gpu.get("pci_bus_id")) for gpu in gpus)
    return {
        "gpus": list(scan["gpus"]),
        "gpu_count": len(scan["gpus"]),
        "missing_from_nvidia_smi": [b for b in scan["gpus"] if _pcie.bus_key(b) not in listed],
    }


def interconnect(gpus: List[Dict[str, Any]], status: Any) -> Optional[str]:
    """nvlink where a GPU has NVLinks, pcie where none has (`nvlink -s` lists no link: the NVLink
    rules do not apply), None where `nvlink -s` was not read or there is no GPU."""
    if status is None or not gpus:
        return None
    return "nvlink" if any(gpu.get("nvlink") for gpu in gpus) else "pcie"


def _smi_facts(
    xml_text: Optional[str], query_text: Optional[str], errors: Dict[str, str]
) -> Dict[str, Any]:
    """Driver, CUDA and per-GPU facts from `-q -x`, else from the --query-gpu fallback."""
    smi: Dict[str, Any] = {"driver_version": None, "cuda_version": None, "gpus": []}
    if xml_text is not None:
        try:
            smi = parse_smi_xml(xml_text)
        except ET.ParseError as exc:
            errors["nvidia-smi -q -x"] = "not XML: %s" % exc
    if not smi["gpus"] and query_text is not None:
        smi["gpus"] = parse_query_health(query_text)
    return smi


def _iommu(host: Mapping[str, Any]) -> Dict[str, Any]:
    cmdline = _pcie.parse_cmdline(host.get("cmdline"))
    group_types = host.get("gpu_group_types") or {}
    return {
        "cmdline": cmdline,
        "groups": host.get("iommu_groups"),
        "gpu_groups": host.get("gpu_groups") or {},
        "gpu_group_types": group_types,
        "mode": _pcie.iommu_mode(cmdline, host.get("iommu_groups"), list(group_types.values())),
    }


def _gpu_bridges(gpus: List[Dict[str, Any]], host: Mapping[str, Any]) -> Dict[str, List[str]]:
    """Each PCI bridge above a GPU nvidia-smi listed -> the GPUs below it."""
    bridges: Dict[str, List[str]] = {}
    for gpu in gpus:
        for bridge in (host.get("gpu_bridges") or {}).get(
            _pcie.short_bus(gpu.get("pci_bus_id")) or "", []
        ):
            bridges.setdefault(bridge, []).append(gpu["gpu"])
    return bridges


# ---------------------------------------------------------------- touching the host


def _kernel_dma_buf() -> Optional[bool]:
    """CONFIG_DMA_SHARED_BUFFER from /proc/config.gz or /boot/config-<release>, if readable."""
    text: Optional[str] = None
    try:
        with gzip.open("/proc/config.gz", "rt") as handle:
            text = handle.read()
    except OSError:
        text = _host_io.read("/boot/config-%s" % os.uname().release)
    if not text:
        return None
    return bool(re.search(r"^CONFIG_DMA_SHARED_BUFFER=y", text, re.MULTILINE))


def _host_facts(deadline: float, scan: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    pci = _pcie.pci_gpus()
    facts: Dict[str, Any] = _pcie.iommu_facts(pci)
    gpu_bridges = {bus: _pcie.bridges_above(path) for bus, path in pci.items()}
    unique = sorted(set(b for bridges in gpu_bridges.values() for b in bridges))
    facts.update(
        pci_gpus=len(pci),
        pci_scan=scan,
        gpu_bridges=gpu_bridges,
        acs=_pcie.acs_readings(unique, deadline) if unique else {},
        cmdline=_host_io.read(PROC_CMDLINE),
        nvidia_peermem=os.path.isdir(os.path.join(SYS_MODULES, "nvidia_peermem")),
        kernel_dma_buf=_kernel_dma_buf(),
    )
    return facts


class _Gathered(object):
    """Everything collect() reads before it builds the data: all commands start at once, each
    finishes under its own timeout, the host facts are read while they run."""

    def __init__(self, smi: Optional[str], started: float, deadline: float) -> None:
        dmesg_path = shutil.which("dmesg")
        dmesg = _host_io.start([dmesg_path]) if dmesg_path else None
        procs: Dict[Tuple[str, ...], Optional["subprocess.Popen[bytes]"]] = {}
        if smi:
            procs = {
                args: _host_io.start([smi, *args])
                for args in (XML_ARGS, NVLINK_STATUS_ARGS, NVLINK_ERRORS_ARGS)
            }
        # The sample's first read: sysfs counters now, beside the commands just started, before
        # the host facts (ACS, IOMMU, bridges): their reading then counts toward the interval.
        scan = _health_sample.scan_pci(ROOT)
        self.read_at = time.monotonic()
        self.counters = _health_sample.read_sysfs(ROOT, scan["aer_devices"] if scan else None)
        self.host = _host_facts(deadline, scan)
        self.host["fabric_manager"] = _fabric_manager.read_fabric_manager(
            ROOT, scan["nvswitches"] if scan else None
        )
        self.module_text: Optional[str] = _host_io.read(PROC_VERSION)
        self.timings: Dict[str, float] = {}
        self.results: Outcomes = {}
        for args, proc in procs.items():
            self.results[args] = _host_io.finish(proc, deadline)
            self.timings["nvidia-smi " + " ".join(args)] = round(time.monotonic() - started, 3)
        self.log = _kernel_log.read_kernel_log(dmesg, time.monotonic() + _kernel_log.LOG_TIMEOUT_S)
        self.timings["kernel log"] = round(time.monotonic() - started, 3)
        self.errors: Dict[str, str] = {}

    def first_read(
        self, gpus: List[Dict[str, Any]], nvlink_args: Tuple[str, ...]
    ) -> _health_sample.Reads:
        """The sample's first read: the sysfs counters and those of the commands' outputs."""
        reads = dict(self.counters)
        reads[SMI_SOURCE] = _health_sample.smi_counters(gpus)
        rc, out, _err = self.results.get(nvlink_args, (None, "", ""))
        parsed = parse_nvlink_errors(out) if rc == 0 else None
        reads[NVLINK_SOURCE] = _health_sample.nvlink_counters(gpus, parsed)
        return reads

    def output(self, args: Tuple[str, ...]) -> Optional[str]:
        """A command's stdout, or None (and why in `errors`) when it failed."""
        rc, out, err = self.results[args]
        if rc == 0:
            return out
        self.errors["nvidia-smi " + " ".join(args)] = _host_io.why(rc, out, err)
        return None


class _ReadAgain(object):
    """The sample's second read: the same commands and files as the first, started at once."""

    def __init__(
        self, smi: str, scan: Optional[Dict[str, Any]], gpus: List[Dict[str, Any]], timeout_s: float
    ) -> None:
        self.smi = smi
        self.aer_devices = scan["aer_devices"] if scan else None
        self.gpus = gpus
        self.timeout_s = timeout_s

    def __call__(self) -> Tuple[_health_sample.Reads, float]:
        procs = {args: _host_io.start([self.smi, *args]) for args in (XML_ARGS, NVLINK_ERRORS_ARGS)}
        read_at = time.monotonic()
        reads = _health_sample.read_sysfs(ROOT, self.aer_devices)
        rc, out, _err = _host_io.finish(procs[XML_ARGS], read_at + self.timeout_s)
        reads[SMI_SOURCE] = _smi_counters_of(out) if rc == 0 else None
        rc, out, _err = _host_io.finish(procs[NVLINK_ERRORS_ARGS], read_at + self.timeout_s)
        parsed = parse_nvlink_errors(out) if rc == 0 else None
        reads[NVLINK_SOURCE] = _health_sample.nvlink_counters(self.gpus, parsed)
        return reads, read_at


def _smi_counters_of(xml_text: str) -> Optional[_health_sample.Snapshot]:
    try:
        return _health_sample.smi_counters(parse_smi_xml(xml_text)["gpus"])
    except ET.ParseError:
        return None


def sample(
    first: _health_sample.Reads,
    read_again: Callable[[], Tuple[_health_sample.Reads, float]],
    seconds: float,
    first_at: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """The counters read `seconds` after the first read (at `first_at`), compared. The tests give
    their own `read_again`, `sleep` and `clock`: two reads from fixtures, no waiting."""
    sleep(max(0.0, first_at + seconds - clock()))
    second, second_at = read_again()
    compared: Dict[str, Any] = _health_sample.compare(first, second, second_at - first_at)
    return compared


def _query_fallback(smi: str, xml_text: Optional[str], timeout_s: float) -> Optional[str]:
    """`--query-gpu` where `-q -x` answered but not with whole XML (not XML, or cut short)."""
    if xml_text is None or "</nvidia_smi_log>" in xml_text:
        return None
    proc = _host_io.start([smi, *HEALTH_QUERY_ARGS])
    rc, out, _err = _host_io.finish(proc, time.monotonic() + timeout_s)
    return out if rc == 0 else None


def _verdict(data: Dict[str, Any], smi_error: Optional[str], pci_gpus: Any) -> Dict[str, Any]:
    if smi_error and "no devices were found" in smi_error.lower():
        return {"ok": False, "data": data, "error": "no GPU: " + smi_error}
    if smi_error and pci_gpus == 0:
        why = "nvidia-smi fails and no NVIDIA GPU is on the PCI bus: " + smi_error
        return {"ok": False, "data": data, "error": why}
    return {"ok": True, "data": data, "error": None}


def collect(options: Dict[str, Any]) -> Dict[str, Any]:
    """Touch the host; return {"ok": bool, "data": {...}, "error": str | None}.

    Absent (ok False): no nvidia-smi, or nvidia-smi finds no GPU, or it fails on a host with no
    NVIDIA GPU on the PCI bus. A GPU whose driver does not answer is a health fact, not an
    absence: ok stays True and data.nvidia_smi_error says why.
    All commands start at once, each under its own timeout."""
    started = time.monotonic()
    timeout_s = command_timeout(options)
    smi = shutil.which("nvidia-smi")
    got = _Gathered(smi, started, started + timeout_s)
    if not smi:
        data = build_data(None, None, None, got.module_text, got.log, got.host)
        data["timings_s"] = got.timings
        return {"ok": False, "data": data, "error": "nvidia-smi not found"}
    xml_text = got.output(XML_ARGS)
    smi_error = got.errors.get("nvidia-smi -q -x")
    query_text = _query_fallback(smi, xml_text, timeout_s)
    data = build_data(
        xml_text,
        got.output(NVLINK_STATUS_ARGS),
        got.output(NVLINK_ERRORS_ARGS),
        got.module_text,
        got.log,
        got.host,
        query_text=query_text,
        smi_error=smi_error,
    )
    data["nvidia_smi"] = smi
    data["command_errors"].update(got.errors)
    if options.get("sample_s"):
        first = got.first_read(data["gpus"], NVLINK_ERRORS_ARGS)
        again = _ReadAgain(smi, got.host["pci_scan"], data["gpus"], timeout_s)
        data["sample"] = sample(first, again, float(options["sample_s"]), got.read_at)
        got.timings["sample"] = round(time.monotonic() - started, 3)
    got.timings["total"] = round(time.monotonic() - started, 3)
    data["timings_s"] = got.timings
    return _verdict(data, smi_error, got.host.get("pci_gpus"))


if __name__ == "__main__":
    import json
    import sys

    del sys.path[0]  # so that `import torch` never finds probes/torch.py itself
    print(
        json.dumps(
            collect(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}), indent=2, sort_keys=True
        )
    )
