"""CLI flags generated from a study's config dataclass (benchlib.config.flags: the
dataclass is the one place a parameter's name, type, default and help are written);
`benchlib data` and `benchlib io` take theirs from there instead of repeating them."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from benchlib.config.flags import add_config_flags, field_help

__all__ = ["add_config_flags", "config_from", "field_help"]  # two of them from config.flags


def config_from(args: argparse.Namespace, cls: type, **overrides: Any):
    """The config the parsed flags describe (bad values raise its ConfigError)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
    return cls(**{**values, **overrides})
