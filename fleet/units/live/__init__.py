"""The live probe's unit: its ranks joined across hosts into jobs."""
