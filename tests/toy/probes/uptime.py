"""How long the host has been up, from /proc/uptime (a toy probe of a user's own); with the
option `whole` (fleet probe --uptime-whole, declared by its unit), in whole seconds."""

# How the controller compares this probe's fields across hosts: an uptime is the host's own.
FACTS = {"volatile": ["uptime_s", "idle_s"]}


def collect(options):
    with open("/proc/uptime", encoding="ascii") as handle:
        up, idle = (float(word) for word in handle.read().split()[:2])
    if options.get("whole"):
        up, idle = float(round(up)), float(round(idle))
    return {"ok": True, "data": {"uptime_s": up, "idle_s": idle}, "error": None}
