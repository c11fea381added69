"""`topo -m` text the parser cannot read is said in `topology.parse_errors`, and the interconnect
is then unknown rather than guessed from an empty or partial matrix (issue 13.4). Golden cases:
h200x2_nvlink_lost_escapes, h200x2_collapsed_lines (tests/probes/test_gpu.py runs them)."""

from __future__ import annotations

import json

from probes import gpu
from tests.probes.gpu_golden import GOLDEN, case_probe_data

QUERY = (GOLDEN / "h200x2_nvlink" / "nvidia-smi_query-gpu.csv").read_text()
HEADER = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"


def test_lost_escapes_parse_as_the_original_capture() -> None:
    original = json.loads((GOLDEN / "h200x2_nvlink" / "expected.json").read_text())
    assert case_probe_data("h200x2_nvlink_lost_escapes") == original["probe_data"]
    assert case_probe_data("h200x2_nvlink_lost_escapes")["interconnect"] == "nvlink"


def test_escape_shown_as_caret_bracket_is_read_too() -> None:
    text = "\t^[[4mGPU0\tGPU1^[[0m\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"
    assert gpu.parse_topology(text)["matrix"] == [["X", "NV18"], ["NV18", "X"]]


def test_unreadable_header_is_an_error_and_no_interconnect_is_guessed() -> None:
    data = case_probe_data("h200x2_collapsed_lines")
    topology = data["topology"]
    assert topology["devices"] == []
    assert topology["matrix"] == []
    assert "'X' is not a device name" in topology["parse_errors"][0]
    assert data["interconnect"] is None
    assert data["gpu_count"] == 2
    assert data["p2p_read"] == {
        "GPU0": {"GPU1": "OK"},
        "GPU1": {"GPU0": "OK"},
    }


def test_a_cut_row_is_named_and_the_interconnect_is_unknown() -> None:
    text = HEADER + "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV1\n"  # the paste cut GPU1's row
    topology = gpu.parse_topology(text)
    assert topology["matrix"] == [["X", "NV18"], []]
    assert topology["parse_errors"] == [
        "row 'GPU1 NV1': not 2 link cells (X, NV#, PIX, PXB, PHB, NODE, SYS)"
    ]
    assert gpu.build_data(QUERY, None, text, None)["interconnect"] is None


def test_rows_out_of_order_or_unknown_are_named() -> None:
    text = HEADER + "GPU1\tNV18\t X \t0-31\t0\t\tN/A\nGPU0\t X \tNV18\t0-31\t0\t\tN/A\n"
    errors = gpu.parse_topology(text)["parse_errors"]
    assert errors[0].startswith("row 'GPU1 NV18 X 0-31 0 N/A': expected the row of GPU0 here")


def test_text_with_no_matrix_at_all_says_what_it_read() -> None:
    topology = gpu.parse_topology("NVIDIA-SMI has failed because it couldn't communicate\n")
    assert topology["parse_errors"] == [
        "no header line naming GPU0 (the first line reads "
        '"NVIDIA-SMI has failed because it couldn\'t communicate")'
    ]
    assert "parse_errors" not in gpu.parse_topology("")  # no output: nothing misread
