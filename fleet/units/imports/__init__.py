"""The imports probe's unit: its key fact (whether SymmetricMemory imports) and the answer to
`--import` (answers.py), said as a section of its own in the terminal, Markdown and HTML."""
