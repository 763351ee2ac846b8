"""One module per notebook study, named as the study is everywhere (notebook, params,
config, analysis, report). Each has `run(cfg, run_id)`, `preflight(cfg)`: the checks
that need the machine a row runs on (a GPU, free cores, the data prepared), run there
(a local sweep, or the Slurm array task) and never where a plan is only loaded, and
`launches(cfg, run_id)`: the workers a row starts, as data (benchlib.studies.repeats),
which the GPU check and the parameter tests read too."""

from __future__ import annotations

import importlib
from typing import Any

from benchlib.config import CONFIGS, studies
from benchlib.config.model_data import ModelDataConfig
from benchlib.errors import ConfigError


def preflight(cfg: Any) -> None:
    """The study's runtime checks for `cfg` (a study config), from the module its registry
    entry names; nothing for a study without. The module is imported here, by name, so
    that loading a plan imports no torch."""
    entry = next((s for s in studies.registry() if s.name == type(cfg).study), None)
    if entry is not None and entry.preflight and entry.module:
        importlib.import_module(entry.module).preflight(cfg)


def config_class(entry: studies.Study) -> type:
    """The config class of a registry entry (a name in benchlib.config or `pkg.mod:Class`)."""
    return CONFIGS[entry.config.rpartition(":")[2]]


def entry_of(cfg: Any) -> studies.Study:
    """The registry's entry whose config `cfg` is (or extends: a config of one's own built
    on a study's); ConfigError naming the studies otherwise."""
    found = next((s for s in studies.registry() if isinstance(cfg, config_class(s))), None)
    if found is None:
        raise ConfigError("study", f"{type(cfg).__name__} is no study's config; studies: "
                          f"{', '.join(s.name for s in studies.registry())}")
    return found


def launches(cfg: Any, run_id: str = "interactive") -> list:
    """The launches a row of `cfg`'s study plans (its module's `launches`, a list of
    repeats.Launch in the order they run); none for a study whose module has none (it
    measures in its kernel, or launches nothing) or that has no module."""
    entry = entry_of(cfg)
    planned = getattr(importlib.import_module(entry.module), "launches", None) \
        if entry.module else None
    return planned(cfg, run_id) if planned is not None else []


def trains(name: str) -> bool:
    """Whether the study called `name` trains a model: its config composes the model and
    its data (config.model_data.ModelDataConfig), so its records carry a step's figures
    (data and compute time) for diagnose to judge."""
    entry = next((s for s in studies.registry() if s.name == name), None)
    return entry is not None and issubclass(config_class(entry), ModelDataConfig)
