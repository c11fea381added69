"""A toy probe of a user's own, `uptime`, with its unit: what adding a probe takes (issue 37)."""
