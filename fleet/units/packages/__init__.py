"""The packages probe's unit: its key fact (the torch installed)."""
