"""One source per parameter: a notebook's parameters cell, its config dataclass, the CLI
flags generated from it and the workers the study starts agree on names, types and
defaults."""

import dataclasses
import typing

import pytest
from conftest import ROOT

from benchlib.cli.main import build_parser
from benchlib.config import (
    CONFIGS,
    DataPrepConfig,
    DpVsDdpConfig,
    MultinodeLightningConfig,
    SingleDeviceIoConfig,
)
from benchlib.runs.params import NotebookSpec

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_parameters_have_the_dataclass_names_types_and_defaults(path):
    spec = NotebookSpec.read(path)
    config = CONFIGS[spec.config]
    hints = typing.get_type_hints(config)
    fields = {f.name: (hints[f.name].__name__, f.default) for f in dataclasses.fields(config)}
    declared = {name: (kind, default) for name, (kind, default) in spec.parameters.items()}
    assert declared == fields


def subcommand(name):
    parser = build_parser()
    return next(a for a in parser._subparsers._group_actions).choices[name]


@pytest.mark.parametrize("command, config, required", [
    ("data", DataPrepConfig, {"path"}),
    ("io", SingleDeviceIoConfig, {"epochs", "device", "path", "dataset"}),
])
def test_cli_flags_are_generated_from_the_dataclass(command, config, required):
    actions = {a.dest: a for a in subcommand(command)._actions}
    for f in dataclasses.fields(config):
        assert f.name in actions, f"benchlib {command} has no flag for {f.name}"
        if f.name not in required:
            assert actions[f.name].default == f.default, f.name


def worker_defaults(parser):
    return {a.dest: a.default for a in parser._actions if a.default is not None}


@pytest.mark.parametrize("parser, config, own", [
    ("benchlib.trainers.ddp", DpVsDdpConfig, set()),
    # the Lightning worker counts epochs per repeat from the seed's positional argument
    ("benchlib.workers.lightning", MultinodeLightningConfig, {"epochs"}),
])
def test_workers_default_to_their_studys_defaults(parser, config, own):
    import importlib

    module = importlib.import_module(parser)
    p = module.parser("ddp") if parser.endswith("ddp") else module.parser()
    defaults = worker_defaults(p)
    shared = {f.name: f.default for f in dataclasses.fields(config)
              if f.name in defaults and f.name not in own}
    assert shared and {k: defaults[k] for k in shared} == shared
