"""fleet's version, on the bottom floor: the API stamps it into every run, the CLI prints it."""

__version__ = "0.1.0"
