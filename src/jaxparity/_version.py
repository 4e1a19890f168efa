"""The package version, in a module of its own so that the result model can name it without importing
the package (whose lazy exports reach every layer)."""

__version__ = "0.1.0"
