"""What every study's config shares: type checks from the annotations, range and choice
checks that name the field, and building one from a notebook's globals().

A config checks values only: nothing here imports torch, reads a file or asks the
machine. What needs the machine (a GPU, the data, free cores) is the study's
`preflight`, run where the row runs (benchlib.studies).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from benchlib.config.studies import of_config
from benchlib.errors import ConfigError

_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


def check_type(field: str, value: Any, type_name: str) -> None:
    """Check `value` against a parameter's annotation (`int`, `float`, `list[int]`, ...).

    An int is accepted where a float is expected; a bool is never taken for an int.
    Annotations this does not know are not checked.
    """
    base = type_name.split("[", 1)[0].strip()
    expected = _TYPE_NAMES.get(base)
    if expected is None:
        return
    ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(field, f"expected {type_name}, got {type(value).__name__} {value!r}")


def require_choice(field: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(field, f"{value!r} is not one of {', '.join(map(str, allowed))}")


def require_min(field: str, value: float, minimum: float) -> None:
    if value < minimum:
        raise ConfigError(field, f"must be >= {minimum}, got {value}")


class _StudyName:
    """A config class's study: the name of the registry entry whose config is the class
    or the nearest class it builds on; "" for a piece no entry names (TrainingConfig).
    Read from the registry, where the name is written once."""

    def __get__(self, cfg: Any, cls: type) -> str:
        entry = next(filter(None, map(of_config, cls.__mro__)), None)
        return entry.name if entry else ""


@dataclasses.dataclass
class StudyConfig:
    """Base of every study's config: type checks, then the study's own `validate`."""

    study = _StudyName()  # the one name of the study (notebook, params, modules)
    # a field's allowed values, where they are few: checked when the config is built, and
    # the choices of its flag (benchlib.config.flags); merged down the classes it builds on
    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {}
    # a study's own defaults for fields declared by a config it builds on (their type,
    # checks and help stay where they are declared: benchlib.config.training)
    defaults: ClassVar[dict[str, Any]] = {}
    # older names of its fields, still read in a parameter table (old -> new), each with a
    # note naming the new one (benchlib.runs.params); merged down the classes it builds on
    renamed: ClassVar[dict[str, str]] = {}
    # older values of a field, still read (field -> {old value: its value now}), each with a
    # note where a table holds one: `compile: true` from when compile was a switch
    old_values: ClassVar[dict[str, dict[Any, Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Turn the class's `defaults` into fields (before @dataclass runs): each keeps its
        place, type and help, with this default."""
        super().__init_subclass__(**kwargs)
        defaults = vars(cls).get("defaults", {})
        declared = {name: f for base in cls.__mro__[1:]
                    for name, f in getattr(base, "__dataclass_fields__", {}).items()}
        if defaults and "__annotations__" not in vars(cls):
            cls.__annotations__ = {}
        for name, value in defaults.items():
            if name not in declared or name in vars(cls)["__annotations__"]:
                raise ConfigError(name, f"{cls.__name__}.defaults names a field it does not "
                                  "build on, or declares it again")
            vars(cls)["__annotations__"][name] = declared[name].type
            setattr(cls, name, value)

    def __post_init__(self) -> None:
        for name in self.old_field_values():  # built from code or a notebook: read as now
            setattr(self, name, self.value_now(name, getattr(self, name)))
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            hint = hints[f.name]
            type_name = getattr(hint, "__name__", str(hint))
            if typing.get_origin(hint) is not None:
                type_name = typing.get_origin(hint).__name__
            check_type(f.name, getattr(self, f.name), type_name)
        for name, values in self.allowed_values().items():
            if getattr(self, name) is not None:  # a field typed `X | None`: not given
                require_choice(name, getattr(self, name), values)
        self.validate()

    @classmethod
    def allowed_values(cls) -> dict[str, tuple[Any, ...]]:
        """Each field's allowed values (`allowed`, of this class and those it builds on)."""
        allowed: dict[str, tuple[Any, ...]] = {}
        for klass in reversed(cls.__mro__):
            allowed.update(vars(klass).get("allowed", {}))
        return allowed

    @classmethod
    def renamed_fields(cls) -> dict[str, str]:
        """Each old name and the field it is now (`renamed`, of this class and its bases)."""
        renamed: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            renamed.update(vars(klass).get("renamed", {}))
        return renamed

    @classmethod
    def old_field_values(cls) -> dict[str, dict[Any, Any]]:
        """Each field's old values and what they are now (`old_values`, merged down)."""
        old: dict[str, dict[Any, Any]] = {}
        for klass in reversed(cls.__mro__):
            old.update(vars(klass).get("old_values", {}))
        return old

    @classmethod
    def value_now(cls, name: str, value: Any) -> Any:
        """`value` of field `name` as it is written now (an old value, of the same type:
        `true` is not `1`, read as its new one)."""
        for old, new in cls.old_field_values().get(name, {}).items():
            if type(value) is type(old) and value == old:
                return new
        return value

    @classmethod
    def read_old_names(cls, params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """`params` with every old name (`renamed`) written as its field and every old
        value (`old_values`) as its new one, and a one-line note for each found; both
        names given is a ConfigError."""
        out, notes = dict(params), []
        for old, new in cls.renamed_fields().items():
            if old in out:
                if new in out:
                    raise ConfigError(old, f"is the old name of {new}; give {new} only")
                out[new] = out.pop(old)
                notes.append(f"{old}: now called {new}; read as {new} (write {new} instead)")
        for name in cls.old_field_values():
            if name in out and cls.value_now(name, out[name]) != out[name]:
                was, out[name] = out[name], cls.value_now(name, out[name])
                notes.append(f"{name}: {str(was).lower() if isinstance(was, bool) else was} "
                             f"is an old value; read as {out[name]} (write {name}: {out[name]})")
        return out, notes

    def validate(self) -> None:
        """Range and choice checks; raise ConfigError naming the field."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]):
        """Build from a mapping that may hold more than the fields (a notebook's globals())."""
        return cls(**{name: params[name] for name in cls.field_names() if name in params})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def require_counts(values: Any, at_least_one: tuple[str, ...]) -> None:
    """The counts of a training run, in a config or a worker's parsed flags: each of
    `at_least_one` >= 1 (None: not given), workers, warm-up and step counts >= 0, and a
    warm-up that leaves a timed step in every epoch."""
    for name in at_least_one:
        if getattr(values, name) is not None:
            require_min(name, getattr(values, name), 1)
    for name in ("num_workers", "warmup_steps", "max_steps"):
        require_min(name, getattr(values, name), 0)
    if values.max_steps and values.warmup_steps >= values.max_steps:
        raise ConfigError("warmup_steps", f"{values.warmup_steps} leaves no timed step of the "
                          f"{values.max_steps} steps per epoch (max_steps); lower warmup_steps "
                          "or raise max_steps")
