"""fleet's version, in a module of its own: the API and the CLI read it without importing the
package's re-exports (fleet/__init__.py imports the API, so the API cannot import it back)."""

__version__ = "0.1.0"
