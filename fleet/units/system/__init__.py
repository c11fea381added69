"""The system probe's unit: its key facts (OS, kernel, CPUs and memory, Python)."""
