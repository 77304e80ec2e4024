"""pearl's version, in a module that imports nothing: every file pearl writes records it, and reading it must not
load the rest of the package (pyproject.toml reads it from here too)."""

__version__ = "0.1.0"
