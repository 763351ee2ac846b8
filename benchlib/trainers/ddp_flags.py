"""The flags and checks of `benchlib.workers.{single,dp,ddp,fsdp2}` (their trainer is
benchlib.trainers.ddp). Apart from the trainer, and free of torch, so that a worker's
`--help` and its refusal of bad flags come before torch is imported (2.3 to 3.5 CPU s a
process on a 2-core VM), in every rank a launch starts."""

from __future__ import annotations

import argparse

from benchlib.config import DpVsDdpConfig as STUDY  # its defaults are this worker's
from benchlib.config.base import require_counts
from benchlib.config.checkpoint import CheckpointConfig, check_checkpoint
from benchlib.config.choices import FP8_RECIPES
from benchlib.config.fault_injection import (
    FaultInjectionConfig,
    WorkerFaultsConfig,
    check_faults,
)
from benchlib.config.flags import add_config_flags, add_piece_flags
from benchlib.config.model_data import check_own_code
from benchlib.config.performance import (
    CompileCacheConfig,
    PerformanceConfig,
    check_compile_cache,
    check_compile_device,
    check_fp8,
)
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.config.worker import WorkerConfig, check_worker
from benchlib.errors import ConfigError


def check_args(args: argparse.Namespace) -> None:
    """What the arguments alone say cannot work, refused before any rank starts."""
    require_counts(args, ("epochs", "batch_size"))
    check_own_code(args)
    check_faults(args)
    check_checkpoint(args)
    check_worker(args)
    if args.strategy == "fsdp2":  # fully_shard needs a process group, of one rank too
        args.group_of_one = True
    if args.strategy == "fsdp2" and args.dp_devices:
        raise ConfigError("dp_devices", "is DataParallel's; fsdp2 runs one rank per device "
                          "(give the ranks with nproc_per_node)")
    if getattr(args, "device", "auto") == "cpu":  # the bootstrap's flag; auto: checked later
        check_compile_device(args.compile, "cpu")
    check_compile_cache(args)
    check_fp8(args)
    if args.precision in FP8_RECIPES and args.strategy == "dp":
        raise ConfigError("precision", f"{args.precision} trains single, ddp or fsdp2; "
                          "DataParallel's replicas of torchao's float8 linears are untested")


# What the distributed flags (benchlib.workers.bootstrap) take instead: device and backend
# (generated there from the same fields), and --timeout (seconds for the rendezvous and
# every collective, where timeout_s is the whole launch's)
NOT_HERE = ("device", "backend", "timeout_s")


# the pieces no study composes, whose fields are this worker's flags: what a study's launch
# or a test sets, and seed 002's own (all of them: its loop applies every one)
OWN_PIECES = (CompileCacheConfig, WorkerFaultsConfig, WorkerConfig)


def parser(strategy: str, study: type[TrainingConfig] = STUDY) -> argparse.ArgumentParser:
    """The worker's flags, every one generated from a config (its type, default, choices
    and help are the config's): the training fields of `study`, its performance settings,
    injected faults and checkpoints (`study`'s defaults where it composes the piece),
    notebook 20's traces, and the pieces no study composes (`OWN_PIECES`)."""
    p = argparse.ArgumentParser(prog=f"benchlib.workers.{strategy}",
                                description=f"{strategy} training (seed 002)")
    add_config_flags(p, study, only=[n for n in training_fields(study) if n not in NOT_HERE])
    add_piece_flags(p, PerformanceConfig, study)
    add_piece_flags(p, FaultInjectionConfig, study)
    add_piece_flags(p, CheckpointConfig, study)
    add_config_flags(p, STUDY, only=["export_trace"])  # notebook 20's, whichever study launches
    for piece in OWN_PIECES:
        add_piece_flags(p, piece)
    p.set_defaults(strategy=strategy)
    return p
