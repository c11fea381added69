"""What to do, one word from a fixed set: a rule's `action:` and a finding's action. A leaf of its
own so that the findings can name the actions without loading the rules engine."""

# After GPUd's and NVSentinel's recommended actions, which map NVIDIA's Xid catalog to the same
# few steps; most disruptive last. `check-access`: the host was not reached (network,
# credentials, host key), nothing is known about its GPUs; `retry`: it did not finish (timed
# out, the run interrupted), nothing is known to be wrong there.
ACTIONS = (
    "none",
    "retry",
    "fix-config",
    "check-access",
    "restart-app",
    "reset-gpu",
    "reboot",
    "drain",
    "inspect-hw",
    "contact-vendor",
)
