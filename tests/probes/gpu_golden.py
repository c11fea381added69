"""The gpu probe's golden cases (tests/probes/golden/gpu: real nvidia-smi captures, each with the
expected parse), shared by the gpu probe tests."""

from __future__ import annotations

from pathlib import Path

from probes import gpu

GOLDEN = Path(__file__).parent / "golden" / "gpu"


def case_probe_data(case: str):
    """build_data over a case that holds the probe's main query, as collect() would call it."""
    folder = GOLDEN / case

    def text(name: str) -> str | None:
        path = folder / name
        return path.read_text() if path.is_file() else None

    query = text("nvidia-smi_query-gpu.csv")
    if query is None or (folder / "nvidia-smi_query-gpu.csv.exit").exists():
        return None
    return gpu.build_data(
        query,
        text("nvidia-smi_-q.txt"),
        text("nvidia-smi_topo_-m.txt"),
        text("nvidia-smi_topo_-p2p_r.txt"),
    )
