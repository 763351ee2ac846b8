"""The flags and checks of `benchlib.workers.{single,dp,ddp,fsdp2}` (their trainer is
benchlib.trainers.ddp). Apart from the trainer, and free of torch, so that a worker's
`--help` and its refusal of bad flags come before torch is imported (2.3 to 3.5 CPU s a
process on a 2-core VM), in every rank a launch starts."""

from __future__ import annotations

import argparse

from benchlib.config import DpVsDdpConfig as STUDY  # its defaults are this worker's
from benchlib.config.base import require_counts
from benchlib.config.choices import AC_MODES, PRECISIONS
from benchlib.config.flags import add_config_flags
from benchlib.config.training import TrainingConfig, check_own_code, training_fields
from benchlib.errors import ConfigError


def check_args(args: argparse.Namespace) -> None:
    """What the arguments alone say cannot work, refused before any rank starts."""
    require_counts(args, ("epochs", "batch_size"))
    check_own_code(args)
    if args.strategy == "fsdp2":  # fully_shard needs a process group, of one rank too
        args.group_of_one = True
    if args.strategy == "fsdp2" and args.dp_devices:
        raise ConfigError("dp_devices", "is DataParallel's; fsdp2 runs one rank per device "
                          "(give the ranks with nproc_per_node)")
    for name in ("inject_step_delay_ms", "inject_comm_delay_ms"):
        if getattr(args, name) < 0:
            raise ConfigError(name, f"must be >= 0, got {getattr(args, name)}")


# What the distributed flags (benchlib.workers.bootstrap) take instead: device and backend
# (generated there from the same fields), and --timeout (seconds for the rendezvous and
# every collective, where timeout_s is the whole launch's)
NOT_HERE = ("device", "backend", "timeout_s")


def parser(strategy: str, study: type[TrainingConfig] = STUDY) -> argparse.ArgumentParser:
    """The worker's flags: the training fields of `study` generated from it (their types,
    defaults, choices and help are the config's), then this worker's own."""
    p = argparse.ArgumentParser(prog=f"benchlib.workers.{strategy}",
                                description=f"{strategy} training (seed 002)")
    add_config_flags(p, study, only=[n for n in training_fields(study) if n not in NOT_HERE])
    add_config_flags(p, STUDY, only=["export_trace"])  # notebook 20's, whichever study launches
    p.add_argument("--image-size", type=int, default=224, help="imagefolder and synthetic")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--ac", choices=AC_MODES, default="none",
                   help="activation checkpointing per block: none, selective (keep the "
                   "matmuls' outputs, recompute the rest) or full")
    p.add_argument("--dp-devices", type=int, default=0,
                   help="dp: the GPUs DataParallel spans (0 = every visible one)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--no-augment", action="store_true")
    p.add_argument("--log-interval", type=int, default=20, help="seed 002's --log-interval")
    p.add_argument("--save-model", action="store_true", help="seed 002's --save-model")
    p.add_argument("--train-dir", default="outputs/checkpoints", help="seed 002's --train-dir")
    p.add_argument("--record-losses", type=int, default=0,
                   help="record the rank-averaged loss of the first N steps")
    p.add_argument("--fail-at-step", type=int, default=0, help="fault injection (tests)")
    p.add_argument("--fail-rank", type=int, default=0)
    p.add_argument("--fail-how", choices=["raise", "kill"], default="raise",
                   help="fault injection: an exception, or SIGKILL")
    p.add_argument("--inject-step-delay-ms", type=float, default=0.0,
                   help="add this many ms to every step, inside its timing (a sleep on CPU, "
                   "a spin kernel on CUDA): the truth `benchlib calibrate --ground-truth` "
                   "checks against, never a real run")
    p.add_argument("--delay-rank", type=int, default=-1,
                   help="only this rank gets --inject-step-delay-ms (-1: every rank): a "
                   "straggler made on purpose, for `benchlib diagnose`'s tests")
    p.add_argument("--inject-comm-delay-ms", type=float, default=0.0,
                   help="DDP on more than one rank: the last gradient bucket of every step "
                   "waits this many ms inside its all-reduce, a slower link made on purpose "
                   "(`benchlib diagnose`'s tests), never a real run")
    p.set_defaults(strategy=strategy)
    return p
