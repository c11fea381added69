"""How far a measurement may move before the diff and drift call it different: 25% by default.

On its own so that the CLI can show the default in `--help` without loading the analysis; the value
is fleet.models.DEFAULT_TOLERANCE, the one fleet fabric's blame uses too."""

from fleet.models import DEFAULT_TOLERANCE as DEFAULT_TOLERANCE
