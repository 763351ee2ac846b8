"""The flags and checks of `benchlib.workers.{single,dp,ddp,fsdp2}` (their trainer is
benchlib.trainers.ddp). Apart from the trainer, and free of torch, so that a worker's
`--help` and its refusal of bad flags come before torch is imported (2.3 to 3.5 CPU s a
process on a 2-core VM), in every rank a launch starts."""

from __future__ import annotations

import argparse

from benchlib.config import DpVsDdpConfig as STUDY  # its defaults are this worker's
from benchlib.config.base import require_counts
from benchlib.config.checkpoint import CheckpointConfig, check_checkpoint
from benchlib.config.fault_injection import FaultInjectionConfig, check_faults
from benchlib.config.flags import add_config_flags, add_piece_flags
from benchlib.config.model_data import check_own_code
from benchlib.config.performance import PerformanceConfig, check_compile_device
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.errors import ConfigError


def check_args(args: argparse.Namespace) -> None:
    """What the arguments alone say cannot work, refused before any rank starts."""
    require_counts(args, ("epochs", "batch_size"))
    check_own_code(args)
    check_faults(args)
    check_checkpoint(args)
    if args.strategy == "fsdp2":  # fully_shard needs a process group, of one rank too
        args.group_of_one = True
    if args.strategy == "fsdp2" and args.dp_devices:
        raise ConfigError("dp_devices", "is DataParallel's; fsdp2 runs one rank per device "
                          "(give the ranks with nproc_per_node)")
    if getattr(args, "device", "auto") == "cpu":  # the bootstrap's flag; auto: checked later
        check_compile_device(args.compile, "cpu")
    if args.compile_cache == "warm" and not args.compile_cache_from:
        raise ConfigError("compile_cache", "warm needs the cache an earlier process filled: "
                          "--compile-cache-from DIR (notebooks 40, 50 and 55 pass it; fill one "
                          "with --compile-cache-to DIR)")
    if args.compile_cache_from and args.compile_cache == "cold":
        raise ConfigError("compile_cache_from", "is a warm start's; compile_cache is cold")
    if args.inject_comm_delay_ms < 0:
        raise ConfigError("inject_comm_delay_ms", f"must be >= 0, got {args.inject_comm_delay_ms}")


# What the distributed flags (benchlib.workers.bootstrap) take instead: device and backend
# (generated there from the same fields), and --timeout (seconds for the rendezvous and
# every collective, where timeout_s is the whole launch's)
NOT_HERE = ("device", "backend", "timeout_s")


def parser(strategy: str, study: type[TrainingConfig] = STUDY) -> argparse.ArgumentParser:
    """The worker's flags: the training fields of `study`, its performance settings, its
    injected faults and its checkpoints, generated from the configs (their types, defaults, choices and
    help are the config's: `study`'s where it composes the piece), then this worker's own."""
    p = argparse.ArgumentParser(prog=f"benchlib.workers.{strategy}",
                                description=f"{strategy} training (seed 002)")
    add_config_flags(p, study, only=[n for n in training_fields(study) if n not in NOT_HERE])
    add_piece_flags(p, PerformanceConfig, study)
    add_piece_flags(p, FaultInjectionConfig, study)
    add_piece_flags(p, CheckpointConfig, study)
    add_config_flags(p, STUDY, only=["export_trace"])  # notebook 20's, whichever study launches
    p.add_argument("--dp-devices", type=int, default=0,
                   help="dp: the GPUs DataParallel spans (0 = every visible one)")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--no-augment", action="store_true")
    p.add_argument("--log-interval", type=int, default=20, help="seed 002's --log-interval")
    p.add_argument("--save-model", action="store_true", help="seed 002's --save-model")
    p.add_argument("--train-dir", default="outputs/checkpoints", help="seed 002's --train-dir")
    p.add_argument("--record-losses", type=int, default=0,
                   help="record the rank-averaged loss of the first N steps")
    p.add_argument("--fail-how", choices=["raise", "kill"], default="raise",
                   help="fault injection (tests): --fail-at-step's rank raises, or SIGKILLs itself")
    p.add_argument("--compile-cache-from", default="",
                   help="compile_cache warm: the inductor cache folder an earlier process "
                   "filled, copied into this process's own before it compiles")
    p.add_argument("--compile-cache-to", default="",
                   help="after training, keep this process's inductor cache folder here "
                   "(rank 0), for a warm start later")
    p.add_argument("--inject-comm-delay-ms", type=float, default=0.0,
                   help="DDP on more than one rank: the last gradient bucket of every step "
                   "waits this many ms inside its all-reduce, a slower link made on purpose "
                   "(`benchlib diagnose`'s tests), never a real run")
    p.add_argument("--no-comm-timer", action="store_true",
                   help="DDP: leave DDP's own all-reduce in place of the comm hook that times "
                   "it (the hook's cost: docs/diagnose.md); the record then says its "
                   "communication is unknown")
    p.set_defaults(strategy=strategy)
    return p
