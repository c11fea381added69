"""The terminal surface (rich): run tables that fit 80 columns, diff and drift views, check
verdicts, fabric pairs and the live progress display. The only renderers that import rich."""
