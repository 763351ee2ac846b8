"""`python -m benchlib ...` (and the `benchlib` command): the bottom layer, which may
import every other."""

from benchlib.cli.main import main

__all__ = ["main"]
