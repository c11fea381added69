"""Lines fleet writes itself fit 80 columns (issue 46, item 8): an error and its hint wrap
between words under their own text (a path stays whole), and the progress log folds the hosts
on the same probes (`h[01-08] on health`, the status line of `--pack health`) and wraps a host's
long error, as a log at 80 columns shows them."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from fleet.models import Host, HostOutcome
from fleet.render.terminal.progress import ProgressEvents
from tests.helpers import invoke_fleet

WIDTH = 80


def fits(text: str) -> bool:
    """Every line at most WIDTH columns, or one word alone (a path is never broken)."""
    return all(len(line) <= WIDTH or len(line.split()) == 1 for line in text.splitlines())


def test_an_error_and_its_hint_wrap_at_80_columns(tmp_path: Path) -> None:
    deep = tmp_path / ("a-folder-with-a-long-name-" * 3) / "runs"
    done = invoke_fleet(tmp_path, "show", "no-such-run", "--runs-dir", str(deep), columns=WIDTH)
    assert done.returncode == 2
    assert done.stderr.startswith("error: no saved run matches 'no-such-run' in")
    assert str(deep) in done.stderr.split()  # whole, on a line of its own if it must be
    assert fits(done.stderr), done.stderr
    assert "\nhint: use latest, previous, latest:INVENTORY, a path, or a name" in done.stderr
    assert "\n      runs`" in done.stderr  # the hint's next line, under its text


def test_the_progress_log_folds_hosts_on_the_same_probes_and_wraps_errors() -> None:
    out = io.StringIO()
    con = Console(file=out, force_terminal=False, width=WIDTH, color_system=None)
    names = [f"h{n:02d}" for n in range(1, 9)]
    with ProgressEvents(con, len(names), ["health"], line_every_s=60) as events:
        for name in names:
            events.host_running(Host(name=name, address=name))
            events.probes_running(Host(name=name, address=name), ["health"])
        assert events.status_line().endswith("0/8 done · 8 running · h[01-08] on health")
        error = "cannot connect to h01 (127.0.46.1:48177): " + "connection refused " * 4
        events.host_finished(HostOutcome("h01", "unreachable", "h01", error=error, elapsed_s=1))
    assert fits(out.getvalue()), out.getvalue()
    assert out.getvalue().startswith("  h01: unreachable after 1.0s: cannot connect to h01")
    assert out.getvalue().splitlines()[1].startswith("      ")  # under the line's text
