"""The health probe's unit: the HTML page's GPU health section."""
