"""fleet: probe many GPU hosts over SSH at once and show where they differ."""

__version__ = "0.1.0"
