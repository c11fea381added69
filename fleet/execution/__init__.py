"""Running the bundle: `bundle` builds the one script a host runs, `fanout` runs it on every host
through a transport, `protocol` reads the host runner's JSON lines into one outcome per host."""
