"""Command-line flags generated from a config dataclass: the dataclass is the one place a
parameter's name, type, default, allowed values and help are written. `benchlib data`,
`benchlib io` and the training workers (benchlib.workers) take their flags from here
instead of repeating them."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Iterable
from typing import Any

from benchlib.errors import ConfigError


@functools.cache
def _own_field_help(cls: type) -> dict[str, str]:
    """The docstrings written under the fields in `cls`'s own class body; read once per
    class and process (every parser a command builds asks again, and parsing the source
    each time cost some 10 ms a class)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # made by dataclasses.make_dataclass: no source, no help
        return {}
    body = ast.parse(source).body[0].body
    helps = {}
    for field, doc in zip(body, body[1:]):
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) \
                and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
                and isinstance(doc.value.value, str):
            helps[field.target.id] = " ".join(doc.value.value.split())
    return helps


def json_object(text: str | dict) -> dict:
    """A dict field's flag value: a JSON object (`--model-args '{"width": 64}'`)."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object, e.g. '{{\"width\": 64}}'")
    return value


json_object.__name__ = "a JSON object"  # what argparse and a run.json check call its type


def field_help(cls: type) -> dict[str, str]:
    """Each field's help: the docstring written under it, in `cls` or in the config it
    builds on (a study composed from benchlib.config.training finds its help there)."""
    helps: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass) and "__annotations__" in vars(klass):
            helps.update(_own_field_help(klass))
    return helps


def add_config_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
                     positional: tuple[str, ...] = (), required: tuple[str, ...] = (),
                     choices: dict[str, Any] | None = None, only: Iterable[str] | None = None,
                     aliases: dict[str, tuple[str, ...]] | None = None) -> None:
    """One flag per field of `cls` (`batch_size` -> `--batch-size`), typed and defaulted
    as the field is (`float | None`: None when not given; `list[str]`: a flag given
    again adds to it), its choices the field's allowed values (`choices` overrides them),
    its metavar the class's `metavars` where it names one, and its help the field's
    docstring. `only`: just these fields; `positional` fields come
    first, in that order, and `required` ones have no default (as the seeds' scripts had
    them); `aliases`: more spellings of a flag (a seed's `--batch_size`)."""
    hints, helps = typing.get_type_hints(cls), field_help(cls)
    metavars = getattr(cls, "metavars", {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if only is not None:
        wanted = set(only)
        unknown = wanted - set(fields)
        if unknown:
            raise ConfigError(min(unknown), f"not a field of {cls.__name__}")
        fields = {name: f for name, f in fields.items() if name in wanted}
    allowed = cls.allowed_values() if hasattr(cls, "allowed_values") else {}  # a StudyConfig's
    choices = {**allowed, **(choices or {})}
    for name in [*positional, *(n for n in fields if n not in positional)]:
        f, kind = fields[name], _given(hints[name])
        kw: dict[str, Any] = {"help": helps.get(name, "")}
        if name in choices:
            kw["choices"] = choices[name]
        if name in metavars:
            kw["metavar"] = metavars[name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
            else f.default
        if kind is dict:
            kind = json_object
        was_switch = _old_values(cls, name).get(True)  # `--compile` alone, as it was
        if kind is bool:
            kw.update(action=argparse.BooleanOptionalAction, default=default)
        elif typing.get_origin(kind) is list:  # a flag given again adds to the list
            kw.update(action="append", type=typing.get_args(kind)[0], default=default)
        elif default is None and name not in positional:  # not given: None, no default shown
            kw.update(type=kind, default=None)
        elif was_switch is not None and name not in positional:
            kw.update(type=kind, default=default, nargs="?", const=was_switch)
            kw["help"] += f" (default {default}; the flag alone: {was_switch})"
        elif name in positional:
            kw["type"] = kind
        else:
            kw.update(type=kind, default=None if name in required else default,
                      required=name in required)
            if name not in required:
                kw["help"] += f" (default {json.dumps(default) if kind is json_object else default})"
        if name in positional:
            parser.add_argument(name, **kw)
        else:
            flags = ["--" + name.replace("_", "-"), *(aliases or {}).get(name, ())]
            parser.add_argument(*flags, dest=name, **kw)


def _given(hint: Any) -> Any:
    """The type a flag converts its text to: `float | None` (a field that is None when
    its flag is not given) converts as float."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(hint) if k is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
    return hint


def _old_values(cls: type, name: str) -> dict[Any, Any]:
    """A field's old values (a StudyConfig's `old_values`), none for another dataclass."""
    return cls.old_field_values().get(name, {}) if hasattr(cls, "old_field_values") else {}


def add_piece_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, piece: type,
                    study: type | None = None, only: Iterable[str] | None = None,
                    aliases: dict[str, tuple[str, ...]] | None = None) -> None:
    """The flags of a config piece's fields (benchlib.config.performance, ...), as a worker
    takes them: with `study`'s defaults where the study composes the piece, else the
    piece's own; `only` those the worker's loop applies; `aliases`, a seed's spellings."""
    source = study if study is not None and issubclass(study, piece) else piece
    names = [f.name for f in dataclasses.fields(piece)]
    add_config_flags(parser, source, only=names if only is None else only, aliases=aliases)


def config_argv(cfg: Any, only: Iterable[str] | None = None) -> list[str]:
    """A config (or a mapping of its fields) as the command line add_config_flags reads
    back into the same values: `--name value` per field, a switch as `--name` or
    `--no-name`, a mapping as JSON, empty strings left out; `only` these fields."""
    values = cfg if isinstance(cfg, dict) else {f.name: getattr(cfg, f.name)
                                                for f in dataclasses.fields(cfg)}
    wanted = set(values) if only is None else set(only)
    argv: list[str] = []
    for name, value in values.items():
        if name not in wanted:
            continue
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(f"--{flag}" if value else f"--no-{flag}")
        elif value != "":
            argv += [f"--{flag}", json.dumps(value) if isinstance(value, dict) else str(value)]
    return argv
