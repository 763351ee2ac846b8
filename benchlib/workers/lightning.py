"""`python -m benchlib.workers.lightning`: Lightning DDP training on one or more nodes,
started by torchrun, srun or Lightning's own launcher (see benchlib.trainers.lightning).

    torchrun --nnodes M --nproc-per-node K -m benchlib.workers.lightning EPOCHS ...
    srun --nodes M --ntasks-per-node K python -m benchlib.workers.lightning EPOCHS ...
    MASTER_ADDR=... MASTER_PORT=... NODE_RANK=N python -m benchlib.workers.lightning ...

Its place in the bootstrap (benchlib.workers.bootstrap): the rank is found from the
launcher's variables before Lightning starts, so that the output goes to
`<log-dir>/rank<R>.log` from the first line; `place` checks the launcher's layout against
--devices and --nnodes (where Lightning would wait forever for ranks that never come, the
run stops at once with one line naming the parameter to change); Lightning joins the
process group itself, inside fit, and leaves it there too."""

from __future__ import annotations

import argparse
import os
import signal
import warnings

from benchlib.config import MultinodeLightningConfig as STUDY  # its defaults are this worker's
from benchlib.config.base import require_counts
from benchlib.config.fault_injection import FaultInjectionConfig, check_faults
from benchlib.config.flags import add_config_flags, add_piece_flags
from benchlib.config.model_data import check_own_code
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.config.worker import WorkerConfig
from benchlib.distributed.lightning_env import Layout, global_rank, layout, read_int
from benchlib.errors import ConfigError
from benchlib.workers.bootstrap import Early, Worker, fail, run

PROG = "benchlib.workers.lightning"


# What Lightning picks itself (backend), and what this worker takes as --timeout (seconds
# for the rendezvous and every collective, where timeout_s is the whole launch's)
NOT_HERE = ("backend", "timeout_s")
SEED_SPELLINGS = {"batch_size": ("--batch_size",), "num_workers": ("--num_workers",)}
# what its LightningModule applies of the performance settings and the injected faults
PERFORMANCE, FAULTS = ("image_size",), ("fail_at_step", "fail_rank")
WORKER = ("augment",)  # of a worker's own settings, the one its module applies


def parser(study: type[TrainingConfig] = STUDY) -> argparse.ArgumentParser:
    """The worker's flags: the training fields of `study`, and the performance settings
    and injected faults its loop applies, generated from the configs (their types,
    defaults, choices and help are the config's; seed 000's spellings too), then its own."""
    p = argparse.ArgumentParser(prog=PROG, description="Lightning DDP training on one or more "
                                "nodes (seed 000's lightning_multinode.py)")
    p.add_argument("total_epochs", nargs="?", type=int, help="epochs per repeat (or --epochs)")
    add_config_flags(p, study, only=[n for n in training_fields(study) if n not in NOT_HERE],
                     aliases=SEED_SPELLINGS)
    add_piece_flags(p, PerformanceConfig, study, only=PERFORMANCE)
    add_piece_flags(p, FaultInjectionConfig, study, only=FAULTS)
    p.set_defaults(epochs=None)  # not given: the positional EPOCHS, else the study's default
    p.add_argument("--devices", "--gpus", type=int, dest="devices",
                   help="processes (GPUs) per node; default: the launcher's, else 1")
    p.add_argument("--nnodes", type=int, help="nodes; default: the launcher's, else 1")
    p.add_argument("--repeats", type=int, default=1, help="the run is epochs x repeats epochs, "
                   "every epoch one sample")
    add_piece_flags(p, WorkerConfig, only=WORKER)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for the rendezvous and every collective")
    p.add_argument("--log-dir", help="each rank writes <log-dir>/rank<R>.log")
    p.add_argument("--result", help="rank 0 writes its result here (JSON)")
    return p


def check_args(args: argparse.Namespace) -> None:
    if None not in (args.total_epochs, args.epochs) and args.total_epochs != args.epochs:
        raise ConfigError("epochs", f"given twice, as {args.total_epochs} and --epochs "
                                    f"{args.epochs}")
    args.epochs = args.epochs or args.total_epochs or STUDY.epochs
    require_counts(args, ("epochs", "repeats", "batch_size", "devices", "nnodes"))
    check_own_code(args)
    check_faults(args)
    if args.timeout <= 0:
        raise ConfigError("timeout", f"must be > 0 seconds, got {args.timeout}")


class Lightning(Worker):
    prog = PROG

    def __init__(self):
        self.trainer = None  # once fit has built it: the local ranks to stop on a failure

    def parser(self) -> argparse.ArgumentParser:
        return parser()

    def check(self, args: argparse.Namespace) -> None:
        # num_workers is a parameter here, not an oversight
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        check_args(args)

    def find(self, args: argparse.Namespace) -> Early:
        local = read_int(os.environ, "SLURM_LOCALID", read_int(os.environ, "LOCAL_RANK", 0))
        return Early(global_rank(os.environ, args.devices), local)

    def place(self, args: argparse.Namespace, early: Early) -> Layout:
        # the layout first: one that cannot work is refused before Lightning's imports
        # (some 6 s of CPU here: torchmetrics imports torchvision's models and torch._dynamo)
        where = layout(os.environ, args.devices, args.nnodes)
        from benchlib.trainers.lightning import use_cuda

        self.cuda = use_cuda(args.device, where.devices)
        return where

    def describe(self, args: argparse.Namespace, where: Layout) -> str:
        return f"from {where.environment}, node {where.node_rank}/{where.nnodes}"

    def work(self, args: argparse.Namespace, where: Layout) -> dict | None:
        from benchlib.trainers.lightning import fit

        def failed(error: BaseException, trainer) -> None:
            self.trainer = trainer
            fail(self, args.log_dir, where.rank, error)

        return fit(args, where, self.cuda, failed)

    def leave(self) -> None:
        """fit left the process group and waited for its local ranks."""

    def stop_local_ranks(self) -> None:
        if self.trainer is None:  # refused before fit built one: no rank started, no import
            return
        from benchlib.trainers.lightning import local_ranks

        for child in local_ranks(self.trainer):
            child.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(run(Lightning()))
