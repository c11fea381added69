"""Running the bundle: `bundle` builds the one script a host runs, `fanout` runs it on every host
through a transport (within the bounds of `limits`), `protocol` reads the host runner's JSON lines
into one outcome per host. `turn` is one host's session under its `deadline`, errors caught and
logged: the fan-out's and fabric's alike."""
