"""The imports probe's unit: its key fact (whether SymmetricMemory imports)."""
