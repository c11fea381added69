"""NVIDIA's Xid catalog as data: each Xid code → its mnemonic, what it means, NVIDIA's recommended
immediate and investigatory action, and the one word of ACTIONS fleet says for it; and the kernel
lines that say a GPU is lost without carrying an Xid ("fallen off the bus").

Sources:
- NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer, the spreadsheet's
  "Catalog" sheet: code, mnemonic, description, Resolution Bucket (Immediate Action) and
  (Investigatory Action)): https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
  and https://docs.nvidia.com/deploy/xid-errors/ (the catalog's home).
- Cross-checked against GPUd (leptonai/gpud, components/accelerator/nvidia/xid/
  catalog_generated.go, generated from that spreadsheet on 2025-10-29; its own repair actions in
  xid.go are more cautious: reboot for most) and NVSentinel (NVIDIA/NVSentinel's syslog health
  monitor maps the immediate bucket to its recommended actions: RESET_GPU → COMPONENT_RESET,
  RESTART_BM → RESTART_BM, IGNORE and RESTART_APP → NONE, and reads Xid 154's target action).
- The "fallen off the bus" line without an Xid: NVIDIA/NVSentinel issue #155 (the capture in
  tests/probes/golden/health/fell_off_bus_no_xid_nvsentinel155).

Codes the catalog lists as unused on current GPUs are left out (61 kept: older GPUs log it), as
are the newest codes the catalog gives no action for (162-172). A code not here gets UNKNOWN_ACTION.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fleet.findings.model import ACTIONS

# NVIDIA's immediate-action buckets → fleet's words. RESTART_BM (bare-metal restart) is a reboot;
# CHECK_MECHANICALS (auxiliary power not connected) is hands on the hardware.
BUCKET_ACTIONS = {
    "IGNORE": "none",
    "RESTART_APP": "restart-app",
    "RESET_GPU": "reset-gpu",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "CHECK_MECHANICALS": "inspect-hw",
    "CONTACT_SUPPORT": "contact-vendor",
    "UPDATE_SWFW": "fix-config",
    "CHECK_UVM": "restart-app",
}

# Where the catalog names a workflow rather than one step, or where fleet reads a kernel log
# after the fact and so says more than the catalog's immediate step. Each with why.
OVERRIDES = {
    # WORKFLOW_XID_45: cleanup after another error; that other Xid says what to do.
    45: "none",
    # WORKFLOW_XID_48: a double-bit error; the workflow resets the GPU (drain first when Xid
    # 63/64 follow).
    48: "reset-gpu",
    # IGNORE in the catalog because the remap's own state says what to do (nvidia-smi's
    # "Pending: Yes", Xid 154 "GPU Reset Required"); the line itself says "reset gpu to
    # activate", and a log read later cannot tell whether that reset happened.
    63: "reset-gpu",
    # WORKFLOW_NVLINK_ERR / WORKFLOW_NVLINK5_ERR: decoded bit by bit, their worst outcome short
    # of support is a GPU reset.
    74: "reset-gpu",
    **dict.fromkeys(range(144, 151), "reset-gpu"),
    # XID_154: the line names the recovery action (xid_action reads it); reset when it cannot.
    154: "reset-gpu",
}

# Xid 154's target: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)".
RECOVERY_ACTIONS = (
    ("drain and reset", "drain"),
    ("drain p2p", "drain"),
    ("reboot", "reboot"),
    ("reset", "reset-gpu"),
    ("pf flr", "reset-gpu"),
    ("none", "none"),
)
RECOVERY_TARGET = re.compile(r"\bto 0x[0-9a-fA-F]+ \(([^)]*)\)")
UNKNOWN_ACTION = "inspect-hw"  # an Xid fleet does not know: look it up, check the GPU

# NVIDIA's catalog, one row per code: code, mnemonic, description, Resolution Bucket (Immediate
# Action), Resolution Bucket (Investigatory Action).
# fmt: off
CATALOG_ROWS: tuple[tuple[int, str, str, str, str], ...] = (
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP", "CONTACT_SUPPORT"),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP", "CHECK_APP/CUDA"),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION/ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "Graphics Engine Exception", "RESTART_APP", "WORKFLOW_XID_13"),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP", "CHECK_APP/CUDA"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP", "CHECK_APP/CUDA"),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE", "CHECK_APP/CUDA"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE", "CONTACT_SUPPORT"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE", "CONTACT_SUPPORT"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE", "CONTACT_SUPPORT"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45", "Solo: RESTART_FM; not solo: IGNORE (follow the other Xid)"),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU", "CONTACT_SUPPORT"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS", "CONTACT_SUPPORT"),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP", "INVESTIGATE_SW"),
    (61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning (older GPUs)", "CONTACT_SUPPORT", ""),
    (62, "PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", "CONTACT_SUPPORT"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU", "CONTACT_SUPPORT"),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE", "INVESTIGATE_SW"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE", "CONTACT_SUPPORT"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP", "CHECK_APP/CUDA"),
    (70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    (75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (78, "VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP", "CHECK_APP/CUDA"),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE", "CONTACT_SUPPORT"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP", "IGNORE (sympathetic)"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU", "IGNORE (sympathetic)"),
    (96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE", "IGNORE"),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE", "IGNORE"),
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU", "INVESTIGATE_SW"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
    (120, "GSP_ERROR", "GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
    (121, "C2C_ERROR", "C2C Error", "IGNORE", "CONTACT_SUPPORT"),
    (126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", "INVESTIGATE_LINK_SI"),
    (137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", "XID_137_FLOW"),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE", "CONTACT_SUPPORT"),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT", ""),
    (143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM", "CONTACT_SUPPORT"),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE", "CONTACT_SUPPORT"),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE", "CONTACT_SUPPORT"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154", "N/A Informational only regarding another Xid"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU", "INVESTIGATE_SW_USER"),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "IGNORE"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE", "CONTACT_SUPPORT"),
    (158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "CONTACT_SUPPORT"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM", "SYMPATHETIC_REPORT_SOLO"),
    (160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE", "INVESTIGATE_SW"),
    (161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE", "INVESTIGATE_SW"),)
# fmt: on


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str
    # NVIDIA's description; fleet's own short words for an Xid are the host's, in each kernel_log
    # event it reports (probes/helpers/health/_kernel_log.py XID_MEANINGS), not written again here
    meaning: str
    nvidia_action: str  # the catalog's immediate-action bucket, as NVIDIA writes it
    nvidia_investigate: str  # its investigatory-action bucket
    action: str  # one word of ACTIONS


@dataclass(frozen=True)
class KernelLine:
    """A kernel log line that says something an Xid would, without an Xid number."""

    marker: str  # lower-case text the line contains
    meaning: str
    action: str


def _entry(row: tuple[int, str, str, str, str]) -> XidEntry:
    code, mnemonic, description, immediate, investigate = row
    action = OVERRIDES.get(code) or BUCKET_ACTIONS.get(immediate, UNKNOWN_ACTION)
    return XidEntry(code, mnemonic, description, immediate, investigate, action)


XIDS: dict[int, XidEntry] = {row[0]: _entry(row) for row in CATALOG_ROWS}

# Newer drivers split it over three lines ("NVRM: The NVIDIA GPU 0000:b3:00.0" … "NVRM: fallen off
# the bus and is not responding to commands."), older ones say "GPU at 0000:01:00.0 has fallen off
# the bus.": the same loss as Xid 79, so the same step.
KERNEL_LINES = (KernelLine("fallen off the bus", "GPU has fallen off the bus", XIDS[79].action),)

XID_IN_TEXT = re.compile(r"\bXid \(?(?:PCI:[0-9a-fA-F:.]+[^)]*\): )?(\d+)\b")


def xid_entry(code: int) -> XidEntry | None:
    return XIDS.get(code)


def xid_action(code: int, text: str = "") -> str:
    """The step Xid `code` calls for; for Xid 154, the recovery action its `text` names."""
    if code == 154 and text:
        target = RECOVERY_TARGET.search(text)
        named = (target.group(1) if target else "").lower()
        for words, action in RECOVERY_ACTIONS:
            if words in named:
                return action
    entry = XIDS.get(code)
    return entry.action if entry else UNKNOWN_ACTION


def actions_in_text(text: str) -> list[str]:
    """The actions of every Xid a line of text names ("Xid 94 on GPU1 …", a kernel log line)
    and of a lost-GPU line without one."""
    found = [xid_action(int(code), text) for code in XID_IN_TEXT.findall(text)]
    lowered = text.lower()
    found.extend(line.action for line in KERNEL_LINES if line.marker in lowered)
    return found


def most_disruptive(actions: Iterable[str], default: str = "none") -> str:
    """The action furthest down ACTIONS among `actions` (`default` when there are none)."""
    return max(actions, key=ACTIONS.index, default=default)
