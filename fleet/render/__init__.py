"""Turn runs into things people read: terminal tables (rich), JSON."""
