"""The HTML report: one self-contained page (inline CSS, inline SVG charts, no network), built
from the same groupings as the terminal (fleet.render.grouping) without importing rich."""
