"""The toy uptime probe's unit: a key fact, a rule helper, a terminal and an HTML section."""
