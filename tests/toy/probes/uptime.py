"""How long the host has been up, from /proc/uptime (a toy probe of a user's own)."""

# How the controller compares this probe's fields across hosts: an uptime is the host's own.
FACTS = {"volatile": ["uptime_s", "idle_s"]}


def collect(options):
    with open("/proc/uptime", encoding="ascii") as handle:
        up, idle = handle.read().split()[:2]
    return {"ok": True, "data": {"uptime_s": float(up), "idle_s": float(idle)}, "error": None}
