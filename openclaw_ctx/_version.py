"""The package version, on its own so that engines can name it without importing the public API."""

__version__ = "0.1.0"
