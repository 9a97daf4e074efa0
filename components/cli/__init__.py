"""The `tenants` command line: one module per command, listed in `main.COMMANDS`."""

from .main import main

__all__ = ["main"]
