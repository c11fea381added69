"""A finding's fix is whole where it shows (issue 46, item 1): sentence ends are a rule that knows
abbreviations, versions, paths and commands, and a fix shortened to a line's room keeps the
command it names — on the terminal and in Markdown."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from fleet.findings.model import Finding
from fleet.render.documents import findings_markdown
from fleet.render.sentences import first_sentence, fix_line, sentences
from fleet.render.terminal.findings import print_finding

CU128 = "https://download.pytorch.org/whl/cu128"
TORCH_FIX = (
    "torch 2.6.0+cu124 has no kernels for compute capability 12.0 (its arch list: sm_50, sm_60, "
    'sm_70, sm_75, sm_80, sm_86, sm_90); every CUDA kernel would fail with "no kernel image is '
    'available". Install a torch build that includes that arch: SM120 (Blackwell) needs a CUDA '
    f"12.8+ build, e.g. `pip install torch --index-url {CU128}`"
)
P2P_FIX = (
    "P2P is not OK for 56 pairs: CNS × 56 (e.g. GPU0→GPU1, GPU0→GPU2, GPU0→GPU3): NCCL and "
    "custom allreduce go through host memory there. Check IOMMU (iommu=pt or off), PCIe ACS on "
    "the switches, and the BIOS."
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It failed. Run it again.", ["It failed.", "Run it again."]),
        ("Use a build, e.g. cu128. Then restart.", ["Use a build, e.g. cu128.", "Then restart."]),
        ("Pin it (e.g. NCCL 2.28.9) here. Go.", ["Pin it (e.g. NCCL 2.28.9) here.", "Go."]),
        ("One GPU, i.e. GPU0, fails. Reset it.", ["One GPU, i.e. GPU0, fails.", "Reset it."]),
        ("Old vs. New differ. Pick one.", ["Old vs. New differ.", "Pick one."]),
        ("See cf. Appendix A. Done.", ["See cf. Appendix A.", "Done."]),
        ("ACS, IOMMU, etc. must be off.", ["ACS, IOMMU, etc. must be off."]),
        ("Check ACS, IOMMU etc. Then go.", ["Check ACS, IOMMU etc.", "Then go."]),
        ("NCCL 2.28.3 is old. Upgrade.", ["NCCL 2.28.3 is old.", "Upgrade."]),
        ("Use NCCL 2.28.3. Upgrade.", ["Use NCCL 2.28.3.", "Upgrade."]),
        ("Edit /etc/nccl.conf now. Then restart.", ["Edit /etc/nccl.conf now.", "Then restart."]),
        ("Run `a.sh. B --x` here. Done.", ["Run `a.sh. B --x` here.", "Done."]),
        ("Run `pip install …/cu128. Now` first.", ["Run `pip install …/cu128. Now` first."]),
        ("Is it up? Try ssh. It works!", ["Is it up?", "Try ssh.", "It works!"]),
        ('It said "no kernel". Install it.', ['It said "no kernel".', "Install it."]),
        ("It is NCCL. `nccl-tests` next.", ["It is NCCL.", "`nccl-tests` next."]),
        ("a  sentence\n  over lines. Next", ["a sentence over lines.", "Next"]),
    ],
)
def test_sentence_ends(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_the_first_sentence_of_the_p2p_fix_is_not_cut_at_e_g() -> None:
    assert first_sentence(P2P_FIX, 200) == (
        "P2P is not OK for 56 pairs: CNS × 56 (e.g. GPU0→GPU1, GPU0→GPU2, GPU0→GPU3): NCCL and "
        "custom allreduce go through host memory there."
    )


def test_a_fix_that_fits_is_whole() -> None:
    assert fix_line("Reset it. Then run again.", 40) == "Reset it. Then run again."


def test_a_fix_without_a_command_is_its_first_sentence_cut_at_a_word() -> None:
    assert fix_line(P2P_FIX, 150).startswith("P2P is not OK for 56 pairs: CNS × 56 (e.g.")
    assert fix_line(P2P_FIX, 150).endswith("go through host memory there.")
    cut = fix_line(P2P_FIX, 60)
    assert cut == "P2P is not OK for 56 pairs: CNS × 56 (e.g. GPU0→GPU1 …"
    assert len(cut) <= 60


@pytest.mark.parametrize("room", [200, 144, 110, 80, 60])
def test_a_shortened_fix_keeps_its_command(room: int) -> None:
    line = fix_line(TORCH_FIX, room)
    assert len(line) <= room
    assert "`pip install torch --index-url " in line
    assert line.endswith("/cu128`")


def test_the_command_keeps_its_url_where_there_is_room() -> None:
    line = fix_line(TORCH_FIX, 200)
    assert line == (
        "Install a torch build that includes that arch: SM120 (Blackwell) needs a CUDA 12.8+ "
        f"build, e.g. `pip install torch --index-url {CU128}`"
    )
    assert fix_line(TORCH_FIX, 144).endswith("e.g. `pip install torch --index-url …/cu128`")


def test_the_first_sentence_comes_first_where_both_fit() -> None:
    text = "The key changed. Check it. Then run `fleet probe --accept-new` again."
    assert fix_line(text, 62) == "The key changed. … Then run `fleet probe --accept-new` again."


def finding(fix: str) -> Finding:
    what = "torch 2.6.0+cu124 cannot run on its GPUs: its arch list lacks sm_120"
    return Finding("error", "torch-arch-supported", what, ("h05",), "fix-config", fix)


def test_the_terminal_and_markdown_show_the_torch_command() -> None:
    console = Console(file=io.StringIO(), width=80, color_system=None)
    print_finding(console, finding(TORCH_FIX))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "--index-url …/cu128`" in " ".join(shown.split())
    assert all(len(line) <= 80 for line in shown.splitlines())
    assert len(shown.splitlines()) <= 4
    markdown = "\n".join(findings_markdown([finding(TORCH_FIX)]))
    assert f"pip install torch --index-url {CU128}" in markdown.replace("\\", "")


def test_markdown_keeps_the_p2p_fix_past_e_g() -> None:
    markdown = "\n".join(findings_markdown([finding(P2P_FIX)])).replace("\\", "")
    assert "(e.g. GPU0→GPU1, GPU0→GPU2, GPU0→GPU3): NCCL and custom allreduce go" in markdown
