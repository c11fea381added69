"""The dir probe's unit: its option (--dir) and its findings' topic."""
