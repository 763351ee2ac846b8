"""One source per parameter: a notebook's parameters cell, its config dataclass, the CLI
flags generated from it and the workers the study starts agree on names, types and
defaults."""

import dataclasses
import functools
import os
import typing

import pytest
from conftest import ROOT

from benchlib import studies
from benchlib.cli.main import build_parser
from benchlib.config import (
    CONFIGS,
    DataPrepConfig,
    DpVsDdpConfig,
    MemoryAndBatchConfig,
    MultinodeLightningConfig,
    SingleDeviceIoConfig,
)
from benchlib.config import studies as registry
from benchlib.config.checkpoint import CheckpointConfig
from benchlib.config.fault_injection import FaultInjectionConfig, WorkerFaultsConfig
from benchlib.config.flags import field_help
from benchlib.config.model_data import ModelDataConfig
from benchlib.config.performance import CompileCacheConfig, PerformanceConfig
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.config.worker import WorkerConfig
from benchlib.errors import ConfigError, UsageError
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
                {PerformanceConfig: None, FaultInjectionConfig: None, CheckpointConfig: None,
                 **dict.fromkeys(ddp_flags.OWN_PIECES)}),
        "lightning": (lightning.parser(), MultinodeLightningConfig, lightning.NOT_HERE + ("epochs",),
                      {PerformanceConfig: lightning.PERFORMANCE, FaultInjectionConfig: lightning.FAULTS,
                       WorkerConfig: lightning.WORKER}),
        "elastic": (elastic.parser(), elastic.Seed001, elastic.NOT_HERE,
                    {PerformanceConfig: elastic.PERFORMANCE, FaultInjectionConfig: None,
                     CheckpointConfig: None, WorkerConfig: elastic.WORKER}),
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
    pieces_fields = {f.name for p in (PerformanceConfig, FaultInjectionConfig, CheckpointConfig,
                                      TrainingConfig, *OWN_PIECES) for f in dataclasses.fields(p)}
    assert {d for d in actions if d in pieces_fields} - set(not_here) == set(wanted)


OWN_PIECES = (WorkerConfig, WorkerFaultsConfig, CompileCacheConfig)


@pytest.mark.parametrize("strategy", ["single", "dp", "ddp", "fsdp2"])
def test_every_flag_of_the_ddp_workers_is_a_config_field_with_its_help(strategy):
    """Nothing of benchlib.workers.single, dp, ddp and fsdp2 is written by hand: each flag
    (but --help) is a field of its study's config or of a piece no study composes (what a
    launch or a test sets, seed 002's switches), typed, defaulted and helped by it; and no
    study's config composes those pieces, so no notebook has them as parameters."""
    from benchlib.trainers import ddp_flags

    parser = ddp_flags.parser(strategy)
    owners = (DpVsDdpConfig, PerformanceConfig, CheckpointConfig, *OWN_PIECES)
    for action in parser._actions:
        if action.dest == "help":
            continue
        owner = next((c for c in owners if action.dest in c.field_names()), None)
        assert owner is not None, f"--{action.dest} is not a config's field"
        field = next(f for f in dataclasses.fields(owner) if f.name == action.dest)
        assert action.default == default(field), action.dest
        assert action.help.startswith(field_help(owner)[action.dest]), action.dest
    assert set(ddp_flags.OWN_PIECES) == set(OWN_PIECES)
    assert not any(issubclass(c, OWN_PIECES) for c in CONFIGS.values())


def test_the_batch_trial_workers_flags_are_notebook_15s_fields_and_its_study_hands_them():
    from benchlib.config.memory_and_batch import TRIAL_FIELDS
    from benchlib.studies.memory_and_batch import launches
    from benchlib.workers.batch_trial import parser
    from benchlib.workers.bootstrap import Plain, checked_params

    p = Plain(None, parser()).parser()  # as the worker runs: the device is the bootstrap's
    actions, helps = {a.dest: a for a in p._actions}, field_help(MemoryAndBatchConfig)
    for f in dataclasses.fields(MemoryAndBatchConfig):
        if f.name in TRIAL_FIELDS:
            assert actions[f.name].default == default(f) and \
                actions[f.name].help.startswith(helps[f.name]), f.name
    cfg = MemoryAndBatchConfig(model="timm:resnet10t", model_args={"drop_rate": 0.1})
    [trial] = launches(cfg, batch=8)
    params = trial.params
    assert (trial.worker, params["batch_size"]) == ("batch_trial", 8)
    assert checked_params(p, params, "run.json") == params
    assert {k: params[k] for k in TRIAL_FIELDS} == {k: getattr(cfg, k) for k in TRIAL_FIELDS}


# ------------------------------------------------------------------ field propagation

@dataclasses.dataclass
class WithLabelSmoothing(ModelDataConfig):
    """benchlib.config.model_data's piece as it would be with two more fields: every
    study that builds a model composes it, the training workers take it."""

    label_smoothing: float = 0.1
    """Cross-entropy label smoothing."""
    deterministic: bool = False
    """Deterministic kernels only."""


@functools.cache
def plus(config: type) -> type:
    """`config` on that piece: as the config would be with the two fields above."""
    return dataclasses.make_dataclass(f"{config.__name__}Plus", [],
                                      bases=(config, WithLabelSmoothing))


def worker_parser(worker: str, plus_fields: bool = False):
    """A worker's parser as the bootstrap runs it; `plus_fields`: as it would be with the
    two fields above (its flags generated from its study, WithLabelSmoothing composed in),
    None for a worker whose flags are not generated from a study's config that way."""
    from benchlib.trainers import ddp_flags
    from benchlib.workers import allreduce, batch_trial, elastic, jax_resnet, lightning
    from benchlib.workers.bootstrap import Later, Plain

    if worker == "lightning":
        return lightning.parser(plus(MultinodeLightningConfig) if plus_fields
                                else MultinodeLightningConfig)
    if worker == "elastic":
        return elastic.parser(plus(elastic.Seed001) if plus_fields else elastic.Seed001)
    fixed = {"batch_trial": lambda: Plain(None, batch_trial.parser()).parser(),
             "allreduce": lambda: Plain(None, allreduce.parser()).parser(),
             "jax_resnet": jax_resnet.parser}
    if worker in fixed:
        return None if plus_fields else fixed[worker]()
    return Plain(Later("benchlib.trainers.ddp", "train"),
                 ddp_flags.parser(worker, plus(DpVsDdpConfig) if plus_fields
                                  else DpVsDdpConfig)).parser()


@functools.cache
def table_configs() -> dict[str, list]:
    """Every row of the project's parameter tables, as its config, by study (the configs
    the project runs: its launches' kinds, from the sweep's own reader)."""
    from benchlib.runs.params import load_plan

    found: dict[str, list] = {}
    for table in sorted((ROOT / "params").glob("*.yaml")):
        for row in load_plan(table, read_notebooks=False):
            found.setdefault(studies.entry_of(row.config).name, []).append(row.config)
    return found


def kind(launch) -> tuple:
    """What tells one launch's shape from another's: its worker, role and parameters' names."""
    names = launch.params if isinstance(launch.params, dict) else \
        [a for a in launch.params if a.startswith("--")]
    return launch.worker, launch.role, tuple(sorted(names))


@functools.cache
def study_launches(name: str) -> tuple:
    """(a config, one launch its study plans for it) for each kind of launch the study's
    default config and its rows in the parameter tables give (studies.launches)."""
    config = studies.config_class(registry.named(name))
    found: dict[tuple, tuple] = {}
    for cfg in [config(), *table_configs().get(name, [])]:
        for launch in studies.launches(cfg):
            found.setdefault(kind(launch), (cfg, launch))
    return tuple(found.values())


# the studies that train a model by starting workers (notebook 10 trains in its kernel);
# their launches are planned here, at collection, with `outputs/` resolved where it is now
LAUNCHING = [s.name for s in registry.registry() if s.module and studies.trains(s.name)
             and study_launches(s.name)]
PLANNED_OUTPUTS = os.environ.get("BENCHLIB_OUTPUTS")
LAUNCHED = {"nproc_per_node"}  # the launcher starts the ranks; a worker's flag is a platform's


def given(source, params: dict | list, parser) -> dict:
    """What a launch gives its worker: its run.json's parameters, or its flags as the
    worker's own parser reads them (each flag named, and "" given by leaving it out)."""
    if isinstance(params, dict):
        return params
    flags = {a.dest: a for a in parser._actions if a.option_strings}
    parsed = parser.parse_known_args(params)[0]
    return {d: getattr(parsed, d) for d, a in flags.items()
            if getattr(source, d, None) == ""
            or any(o in params or o.replace("--", "--no-", 1) in params for o in a.option_strings)}


def assert_carries(source, given: dict, parser, where: str, handed=()) -> None:
    """Every field of `source` the program has a flag for is given (nothing left to the
    program's own default), and read back by its own parser it is the config's value;
    but those the launch hands otherwise on purpose (`handed`: Launch.handed)."""
    from benchlib import paths
    from benchlib.workers.bootstrap import checked_params

    takes = {a.dest for a in parser._actions} & set(source.field_names()) - LAUNCHED
    assert takes, where
    assert takes - set(handed) <= set(given), f"{where}: not given {sorted(takes - set(given))}"
    args = checked_params(parser, given, where)
    for name in takes - set(handed):
        want = getattr(source, name)
        want = str(paths.resolve(want)) if name == "path" else want
        assert args[name] == want, f"{where}: {name}"


@pytest.mark.parametrize("name", LAUNCHING)
def test_every_field_a_study_composes_reaches_its_workers_run_json_with_its_value(
        name, monkeypatch):
    """Every study that starts a worker hands it, by name, every field of its config that
    the worker has a flag for (the training fields, the performance settings, the faults
    to inject, notebook 15's trial fields, notebook 40's JAX fields), each launch as the
    study plans it (its `launches`); but what a launch hands otherwise on purpose, which
    it says (`Launch.handed`: the eager side's compile off, DLPerf's warm-up, ...)."""
    # the paths are read back as the launches were planned (a module fixture on this
    # worker may have moved BENCHLIB_OUTPUTS since)
    if PLANNED_OUTPUTS is None:
        monkeypatch.delenv("BENCHLIB_OUTPUTS", raising=False)
    else:
        monkeypatch.setenv("BENCHLIB_OUTPUTS", PLANNED_OUTPUTS)
    for cfg, launch in study_launches(name):
        parser = worker_parser(launch.worker)
        assert_carries(cfg, given(cfg, launch.params, parser), parser,
                       f"{name} -> {launch.worker} ({launch.role})", launch.handed)


def test_the_studies_followed_are_every_one_that_trains_but_notebook_10():
    """A study whose config builds a model trains it in workers it launches, and so is
    followed above, but notebook 10, which measures in its kernel: a training study that
    planned no launch would not be followed."""
    trains = {s.name for s in registry.registry() if s.module and studies.trains(s.name)}
    assert trains - set(LAUNCHING) == {"single_device_io"}
    assert {"compile", "memory_and_batch", "dp_vs_ddp"} <= set(LAUNCHING)
    assert {launch.worker for name in LAUNCHING for _, launch in study_launches(name)} == {
        "single", "dp", "ddp", "fsdp2", "lightning", "elastic", "batch_trial", "allreduce",
        "jax_resnet"}


# the studies whose training workers generate their flags from the study's config
PLUS = [name for name in LAUNCHING
        if any(worker_parser(launch.worker, True) for _, launch in study_launches(name))]


@pytest.mark.parametrize("name", PLUS)
def test_a_field_added_to_a_piece_reaches_the_worker_flags_and_its_run_json(tmp_path, name):
    from benchlib.launch import protocol
    from benchlib.workers.bootstrap import parse

    for cfg, launch in study_launches(name):
        parser = worker_parser(launch.worker, plus_fields=True)
        if parser is None:  # a worker whose flags are its own (all-reduce, JAX)
            continue
        [mine] = [x for x in studies.launches(plus(type(cfg))(**cfg.as_dict()))
                  if kind(x)[:2] == kind(launch)[:2]][:1]
        params = dict(mine.params)
        text = parser.format_help()
        assert "--label-smoothing LABEL_SMOOTHING" in text and "--deterministic" in text
        assert "Cross-entropy label smoothing. (default 0.1)" in " ".join(text.split())
        assert (params["label_smoothing"], params["deterministic"]) == (0.1, False)
        params.update(label_smoothing=0.25, deterministic=True)
        run_json = protocol.write_run_config(tmp_path, launch.worker, params)
        args = parse(parser, ["--config", str(run_json)])
        assert (args.label_smoothing, args.deterministic) == (0.25, True)


def test_every_gpu_check_command_carries_its_study_configs_fields(tmp_path):
    """The GPU check's command lines are made from the studies' configs by the studies'
    own launches: each step of a study (`source`) gives its worker or CLI every field of
    that config it takes, with the config's value (a run.json read as the worker reads it,
    or flags read by the program's own parser), but what its launch hands otherwise."""
    from benchlib.gpucheck import steps

    studied = [s for s in steps.plan(tmp_path) if s.source is not None]
    assert {studies.entry_of(s.source).name for s in studied} == set(LAUNCHING)
    for step in studied:
        assert step.params.items() >= step.source.as_dict().items(), step.name  # its record
        handed = step.launch.handed if step.launch is not None else ()
        if step.config is not None:
            _, worker, params = step.config
            assert_carries(step.source, params, worker_parser(worker), step.name, handed)
            continue
        if "benchlib.gpucheck.fp8_ab" in step.argv:  # the study's own run of a table's row
            at = step.argv.index("benchlib.gpucheck.fp8_ab")
            table, precision, fp8_filter = step.argv[at + 1:at + 4]
            [row] = [c for c in steps.table_rows(table)
                     if (c.precision, c.fp8_filter) == (precision, fp8_filter)]
            repeats = int(step.argv[step.argv.index("--repeats") + 1])
            assert dataclasses.replace(row, repeats=repeats) == step.source, step.name
            continue
        program, argv = ((worker_parser("jax_resnet"), step.argv[3:]) if "jax_resnet" in step.argv[2]
                         else (subcommand("maxbatch"), step.argv[step.argv.index("maxbatch") + 1:]))
        assert_carries(step.source, given(step.source, argv, program), program, step.name, handed)


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


def test_benchlib_projects_flags_are_generated_from_its_configs():
    """`benchlib project` writes no flag by hand: each is a field of its configs, with
    that field's help; an input left out is None (the projection names what it misses),
    a repeated flag adds to its list, and the help names every model and what-if the
    projection knows."""
    from benchlib.cli import project
    from benchlib.config.project import CheckpointPlanConfig, ProjectConfig
    from benchlib.projection.scaling import MODEL_PARAMS, WHAT_IF

    parser = project.build_parser()
    owners = (ProjectConfig, CheckpointPlanConfig)
    for action in parser._actions:
        if action.dest == "help":
            continue
        owner = next((c for c in owners if action.dest in c.field_names()), None)
        assert owner is not None, f"--{action.dest} is not a config's field"
        assert action.help.startswith(field_help(owner)[action.dest]), action.dest
    args = parser.parse_args(["--samples-per-s", "120", "--what-if", "inter_bw=2x",
                              "--what-if", "batch_size=256", "--check-dlperf"])
    assert (args.samples_per_s, args.what_if, args.check_dlperf) == \
        (120.0, ["inter_bw=2x", "batch_size=256"], True)
    assert (args.batch_size, args.mtbf, args.source, args.strategy) == (None, None, [], "ddp")
    assert parser.parse_args([]).what_if == []  # a new list each time, not the last one's
    text = " ".join(parser.format_help().split())
    assert all(name in text for name in [*MODEL_PARAMS, *WHAT_IF])
    with pytest.raises(UsageError, match=r"--strategy: invalid choice: 'zero3' \(choose from"):
        parser.parse_args(["--strategy", "zero3"])
