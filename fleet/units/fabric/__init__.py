"""The `fabric` result (fleet fabric, not a probe file): its fact declaration and headlines."""
