"""The `fleet` command: click commands over the Python API, and the one place that exits."""

from fleet.cli.main import main

__all__ = ["main"]
