"""The `eventcraft` command line (see `main.py`)."""

from .main import cli, main

__all__ = ["cli", "main"]
