"""How far a measurement may move before the diff and drift call it different: 25% by default.

On its own so that the CLI can show the default in `--help` without loading the analysis."""

DEFAULT_TOLERANCE = 0.25
