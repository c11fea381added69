"""Turn runs into things people read. `terminal/` (rich) and `html/` (the offline report) are the
two surfaces; `grouping` holds what both group alike; `documents` (JSON, Markdown) and `junit`
are the machine-readable ones."""
