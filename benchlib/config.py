"""Each study's parameters as a dataclass, checked when it is built.

A notebook's `parameters` cell holds plain values; the next cell turns them into one
of these (`cfg = DataPrepConfig.from_params(globals())`). A sweep builds the same
config for every row before anything runs, so bad input fails early with a message
that names the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

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


@dataclasses.dataclass
class StudyConfig:
    """Base of every study's config: type checks, then the study's own `validate`."""

    config_name: ClassVar[str] = "study"

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            hint = hints[f.name]
            type_name = getattr(hint, "__name__", str(hint))
            if typing.get_origin(hint) is not None:
                type_name = typing.get_origin(hint).__name__
            check_type(f.name, getattr(self, f.name), type_name)
        self.validate()

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


DATASETS_PREPARED = ("fashion-mnist", "mydataset")


@dataclasses.dataclass
class DataPrepConfig(StudyConfig):
    """Data preparation (notebook 00, `python -m benchlib data`)."""

    path: str = "outputs/data"
    """Folder the data sets are written to; relative paths start at the project root."""
    dataset: str = "all"
    """Which data set to prepare: all, fashion-mnist or mydataset."""
    size: int = 60000
    """MyDataSet sample count (seed 000's --size)."""
    fashion_size: int = 60000
    """FashionMNIST training images when generated offline (the test split gets a sixth)."""
    offline: bool = False
    """Generate FashionMNIST instead of downloading it (automatic without network)."""
    seed: int = 0
    """Seed of the generators: the same seed gives byte-identical files."""

    def validate(self) -> None:
        require_choice("dataset", self.dataset, ("all", *DATASETS_PREPARED))
        require_min("size", self.size, 1)
        require_min("fashion_size", self.fashion_size, 10)
        if not self.path:
            raise ConfigError("path", "must name a folder, e.g. outputs/data")

    def datasets(self) -> tuple[str, ...]:
        return DATASETS_PREPARED if self.dataset == "all" else (self.dataset,)


@dataclasses.dataclass
class AnalysisConfig(StudyConfig):
    """The analysis notebook (90): where the records are."""

    results_dir: str = "outputs/results"
    """Folder of result records (one sub-folder per study)."""


CONFIGS: dict[str, type[StudyConfig]] = {
    "DataPrepConfig": DataPrepConfig,
    "AnalysisConfig": AnalysisConfig,
}
