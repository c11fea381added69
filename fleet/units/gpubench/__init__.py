"""The gpubench probe's unit: scores and datasheets, `_gpubench`, its terminal view."""
