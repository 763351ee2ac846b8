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
    FaultToleranceConfig,
    MemoryAndBatchConfig,
    MultinodeLightningConfig,
    SingleDeviceIoConfig,
)
from benchlib.config.fault_injection import FaultInjectionConfig
from benchlib.config.flags import field_help
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.errors import ConfigError
from benchlib.runs.params import NotebookSpec

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_parameters_have_the_dataclass_names_types_and_defaults(path):
    spec = NotebookSpec.read(path)
    config = CONFIGS[spec.config]
    hints = typing.get_type_hints(config)
    fields = {f.name: (hints[f.name].__name__, default(f)) for f in dataclasses.fields(config)}
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
            assert actions[f.name].default == default(f), f.name


def worker_defaults(parser):
    return {a.dest: a.default for a in parser._actions if a.default is not None}


@pytest.mark.parametrize("parser, config, own", [
    ("benchlib.trainers.ddp_flags", DpVsDdpConfig, set()),
    # the Lightning worker counts epochs per repeat from the seed's positional argument
    ("benchlib.workers.lightning", MultinodeLightningConfig, {"epochs"}),
])
def test_workers_default_to_their_studys_defaults(parser, config, own):
    import importlib

    module = importlib.import_module(parser)
    p = module.parser("ddp") if parser.endswith("ddp_flags") else module.parser()
    defaults = worker_defaults(p)
    shared = {f.name: default(f) for f in dataclasses.fields(config)
              if f.name in defaults and f.name not in own}
    assert shared and {k: defaults[k] for k in shared} == shared


def training_workers():
    """Each training worker: its parser, the study whose defaults it takes, the fields of
    that study it leaves to other flags, and the pieces it composes (None: all fields)."""
    from benchlib.trainers import ddp_flags
    from benchlib.workers import elastic, lightning

    return {
        "ddp": (ddp_flags.parser("ddp"), DpVsDdpConfig, ddp_flags.NOT_HERE,
                {PerformanceConfig: None, FaultInjectionConfig: None}),
        "lightning": (lightning.parser(), MultinodeLightningConfig, lightning.NOT_HERE + ("epochs",),
                      {PerformanceConfig: lightning.PERFORMANCE, FaultInjectionConfig: lightning.FAULTS}),
        "elastic": (elastic.parser(), elastic.Seed001, elastic.NOT_HERE,
                    {PerformanceConfig: elastic.PERFORMANCE, FaultInjectionConfig: None}),
    }


@pytest.mark.parametrize("worker", ["ddp", "lightning", "elastic"])
def test_each_workers_flags_are_its_configs_fields_with_their_defaults_and_help(worker):
    """No flag a config declares is written by hand in a worker: the training fields of its
    study, and of each piece (performance, fault injection) those its loop applies, each
    with the config's default (the study's where it composes the piece) and help."""
    parser, study, not_here, pieces = training_workers()[worker]
    actions = {a.dest: a for a in parser._actions}
    wanted = {name: study for name in training_fields(study) if name not in not_here}
    for piece, only in pieces.items():
        source = study if issubclass(study, piece) else piece
        wanted.update({f.name: source for f in dataclasses.fields(piece)
                       if only is None or f.name in only})
    for name, source in wanted.items():
        field = next(f for f in dataclasses.fields(source) if f.name == name)
        assert name in actions, f"{worker}: no flag for {name}"
        assert actions[name].default == default(field), name
        assert actions[name].help.startswith(field_help(source)[name]), name
    pieces_fields = {f.name for p in (PerformanceConfig, FaultInjectionConfig, TrainingConfig)
                     for f in dataclasses.fields(p)}
    assert {d for d in actions if d in pieces_fields} - set(not_here) == set(wanted)


def test_the_batch_trial_workers_flags_are_notebook_15s_fields_and_its_study_hands_them():
    from benchlib.config.memory_and_batch import TRIAL_FIELDS
    from benchlib.studies.memory_and_batch import trial_params
    from benchlib.workers.batch_trial import parser
    from benchlib.workers.bootstrap import Plain, checked_params

    p = Plain(None, parser()).parser()  # as the worker runs: the device is the bootstrap's
    actions, helps = {a.dest: a for a in p._actions}, field_help(MemoryAndBatchConfig)
    for f in dataclasses.fields(MemoryAndBatchConfig):
        if f.name in TRIAL_FIELDS:
            assert actions[f.name].default == default(f) and \
                actions[f.name].help.startswith(helps[f.name]), f.name
    cfg = MemoryAndBatchConfig(model="timm:resnet10t", model_args={"drop_rate": 0.1})
    params = trial_params(cfg, 8)
    assert checked_params(p, params, "run.json") == params
    assert {k: params[k] for k in TRIAL_FIELDS} == {k: getattr(cfg, k) for k in TRIAL_FIELDS}


# ------------------------------------------------- one more field in the training config

@dataclasses.dataclass
class WithLabelSmoothing(TrainingConfig):
    """benchlib.config.training's TrainingConfig as it would be with two more fields."""

    label_smoothing: float = 0.1
    """Cross-entropy label smoothing."""
    deterministic: bool = False
    """Deterministic kernels only."""


@dataclasses.dataclass
class DpVsDdpPlus(DpVsDdpConfig, WithLabelSmoothing):
    """Notebook 20's config on those training fields."""


@dataclasses.dataclass
class MultinodePlus(MultinodeLightningConfig, WithLabelSmoothing):
    """Notebook 30's config on those training fields."""


@dataclasses.dataclass
class FaultTolerancePlus(FaultToleranceConfig, WithLabelSmoothing):
    """Notebook 35's config on those training fields."""


def worker_parsers(config):
    """(the worker params the study writes, the worker's parser as the bootstrap runs it)
    for every worker the study starts; the workers' flags generated from `config`, or from
    seed 001's defaults on the same training fields (the elastic worker)."""
    from benchlib.studies import dp_vs_ddp, fault_tolerance, multinode_lightning
    from benchlib.trainers import ddp_flags
    from benchlib.workers import elastic, lightning
    from benchlib.workers.bootstrap import Later, Plain

    train = Later("benchlib.trainers.ddp", "train")

    if issubclass(config, DpVsDdpConfig):
        return [(dp_vs_ddp.trainer_params(config(strategy=s, nproc_per_node=1)),
                 Plain(train, ddp_flags.parser(s, config)).parser()) for s in ("single", "dp", "ddp")]
    if issubclass(config, MultinodeLightningConfig):
        return [(multinode_lightning.worker_params(config(trainer="ddp")),
                 Plain(train, ddp_flags.parser("ddp", config)).parser()),
                (multinode_lightning.worker_params(config(trainer="lightning")),
                 lightning.parser(config))]
    flags = elastic.Seed001 if config is FaultToleranceConfig else dataclasses.make_dataclass(
        "Seed001Plus", [], bases=(elastic.Seed001, WithLabelSmoothing))
    return [(fault_tolerance.worker_params(config(dataset=d), "checkpoints", fail=True),
             elastic.parser(flags)) for d in ("fashion-mnist", "dummy")]


@pytest.mark.parametrize("config", [DpVsDdpPlus, MultinodePlus, FaultTolerancePlus])
def test_a_field_added_to_the_training_config_reaches_the_worker_flags_and_its_run_json(
        tmp_path, config):
    from benchlib.launch import protocol
    from benchlib.workers.bootstrap import parse

    for params, parser in worker_parsers(config):
        text = parser.format_help()
        assert "--label-smoothing LABEL_SMOOTHING" in text and "--deterministic" in text
        assert "Cross-entropy label smoothing. (default 0.1)" in " ".join(text.split())
        assert (params["label_smoothing"], params["deterministic"]) == (0.1, False)
        params.update(label_smoothing=0.25, deterministic=True)
        run_json = protocol.write_run_config(tmp_path, "ddp", params)
        args = parse(parser, ["--config", str(run_json)])
        assert (args.label_smoothing, args.deterministic) == (0.25, True)


@pytest.mark.parametrize("module", ["ddp", "lightning", "elastic"])
def test_each_worker_has_a_flag_for_every_training_field(module):
    """What `python -m benchlib.workers.ddp --help` shows: every field of
    benchlib.config.training, but timeout_s (the worker's --timeout, the rendezvous and
    collectives only) and Lightning's backend (Lightning picks it)."""
    import subprocess
    import sys

    text = subprocess.run([sys.executable, "-m", f"benchlib.workers.{module}", "--help"],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    skipped = {"timeout_s"} | ({"backend"} if module == "lightning" else set())
    for name in set(training_fields(TrainingConfig)) - skipped:
        assert "--" + name.replace("_", "-") + " " in text, name


@pytest.mark.parametrize("config", [DpVsDdpConfig, MultinodeLightningConfig,
                                    FaultToleranceConfig])
def test_every_worker_parameter_a_study_writes_is_a_flag_of_its_worker(tmp_path, config):
    from benchlib.workers.bootstrap import checked_params

    for params, parser in worker_parsers(config):
        assert checked_params(parser, params, "run.json") == params


def test_a_study_names_its_own_defaults_and_keeps_the_fields_type_and_help():
    shared = {f.name: f for f in dataclasses.fields(TrainingConfig)}
    mine = {f.name: f for f in dataclasses.fields(MultinodeLightningConfig)}
    assert {n for n in shared if mine[n].default != shared[n].default} == \
        set(MultinodeLightningConfig.defaults)
    assert all(typing.get_type_hints(MultinodeLightningConfig)[n] is
               typing.get_type_hints(TrainingConfig)[n] for n in shared)
    assert field_help(MultinodeLightningConfig)["momentum"] == "SGD momentum (seed 002 and DLPerf: 0.9)."
    with pytest.raises(ConfigError, match="lr_max: Bad.defaults names a field it does not"):
        @dataclasses.dataclass
        class Bad(TrainingConfig):
            defaults: typing.ClassVar[dict] = {"lr_max": 1.0}
