"""CLI flags generated from a study's config dataclass: the dataclass is the one place a
parameter's name, type, default and help are written; `benchlib data` and `benchlib io`
take theirs from here instead of repeating them."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
import typing
from typing import Any


def field_help(cls: type) -> dict[str, str]:
    """Each field's help: the docstring written under it in the class body."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    helps = {}
    for field, doc in zip(body, body[1:]):
        if isinstance(field, ast.AnnAssign) and isinstance(doc, ast.Expr) \
                and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
            helps[field.target.id] = " ".join(doc.value.value.split())
    return helps


def add_config_flags(parser: argparse.ArgumentParser, cls: type,
                     positional: tuple[str, ...] = (), required: tuple[str, ...] = (),
                     choices: dict[str, Any] | None = None) -> None:
    """One flag per field of `cls` (`batch_size` -> `--batch-size`), typed and defaulted
    as the field is; `positional` fields come first, in that order, and `required` ones
    have no default (as the seeds' scripts had them)."""
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in [*positional, *(n for n in fields if n not in positional)]:
        f, kind = fields[name], hints[name]
        kw: dict[str, Any] = {"help": helps.get(name, "")}
        if choices and name in choices:
            kw["choices"] = choices[name]
        if kind is bool:
            kw.update(action=argparse.BooleanOptionalAction, default=f.default)
        elif name in positional:
            kw["type"] = kind
        else:
            kw.update(type=kind, default=None if name in required else f.default,
                      required=name in required)
            if name not in required:
                kw["help"] += f" (default {f.default})"
        parser.add_argument(name if name in positional else "--" + name.replace("_", "-"), **kw)


def config_from(args: argparse.Namespace, cls: type, **overrides: Any):
    """The config the parsed flags describe (bad values raise its ConfigError)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
    return cls(**{**values, **overrides})
