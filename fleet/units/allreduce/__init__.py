"""The allreduce probe's unit: headlines, the matrix, the line rate, rule helpers, the
terminal's matrix table and the HTML page's curves."""
