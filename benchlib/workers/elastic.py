"""`python -m benchlib.workers.elastic`: seed 001's elastic ImageNet trainer, restartable.

    torchrun --standalone --nproc-per-node 4 --max-restarts 3 -m benchlib.workers.elastic \\
        DATA --val-path DATA/val --epochs 30 --resume-or-start --checkpoint-path CKPT \\
        --checkpoint dcp_async --checkpoint-every 500
    srun python -m benchlib.workers.elastic DATA --dist-init-method slurm --resume ...

Data: `--dataset imagefolder` (DATA/train/<class>/*.JPEG, ImageNet's layout, or a
folder prepared by `benchlib data`), cifar10, fashion-mnist, mydataset, or `--dummy`
(`--dataset dummy`).

Resuming: `--resume` continues from the newest valid checkpoint and refuses to start
without one; `--resume-or-start` starts fresh when there is none. A restarted attempt
(TORCHELASTIC_RESTART_COUNT or SLURM_RESTART_COUNT > 0) always resumes. Without either
flag a folder that already holds checkpoints is refused rather than overwritten.

Exit codes: 0 done (rank 0 wrote --result); 2 bad input (one line naming the parameter,
on stderr and in the rank's log, before any step runs); 75 preempted by SIGTERM after a
checkpoint (run again with --resume); 1 anything else (traceback in the rank's log).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any, ClassVar

from benchlib import paths
from benchlib.config.base import require_min
from benchlib.config.checkpoint import CheckpointConfig, check_checkpoint
from benchlib.config.choices import ELASTIC_DATASETS, FP8_RECIPES
from benchlib.config.fault_injection import FaultInjectionConfig, check_faults
from benchlib.config.flags import add_config_flags, add_piece_flags
from benchlib.config.model_data import check_own_code
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import TrainingConfig, training_fields
from benchlib.config.worker import WorkerConfig
from benchlib.distributed.device import check_precision, choose_backend, device_for
from benchlib.distributed.env import DistEnv, resolve
from benchlib.distributed.group import init
from benchlib.errors import ConfigError, UsageError
from benchlib.launch import protocol
from benchlib.trainers import checkpoint, elastic
from benchlib.trainers.preemption import PreemptionFlag
from benchlib.workers.bootstrap import Worker, run

PROG = "benchlib.workers.elastic"
IMAGENET_TRAIN = 1281167  # pytorch/examples' --dummy epoch: ImageNet's training set


@dataclasses.dataclass
class Seed001(TrainingConfig, CheckpointConfig):
    """The training and checkpoint fields as seed 001's trainer has them: its data sets and
    defaults (the worker's flags are generated from these; a study hands its own values)."""

    # dummy: seed 001's --dummy (random images, no files), as notebook 35 names it
    allowed: ClassVar[dict[str, tuple[Any, ...]]] = {"dataset": ELASTIC_DATASETS}
    defaults: ClassVar[dict[str, Any]] = {"dataset": "imagefolder", "model": "resnet18",
                                          "batch_size": 64, "warmup_steps": 5,
                                          "checkpoint_path": "outputs/checkpoints/elastic"}


# its --timeout (the distributed group) is the rendezvous' and every collective's, where
# timeout_s is the whole launch's
NOT_HERE = ("timeout_s",)
PERFORMANCE = ("precision", "channels_last", "image_size")  # what its loop applies
WORKER = ("augment", "log_interval")  # of a worker's own settings, those its loop applies


def parser(study: type[TrainingConfig] = Seed001) -> argparse.ArgumentParser:
    """The worker's flags: the training fields of `study`, the performance settings its
    loop applies and the injected faults, generated from the configs (their types,
    defaults, choices and help are the config's), then seed 001's own."""
    p = argparse.ArgumentParser(prog=PROG, description="elastic, checkpointed training (seed 001)")
    p.add_argument("data", nargs="?", help="data folder (seed 001's positional argument; "
                   "else --path)")
    add_config_flags(p, study, only=[n for n in training_fields(study) if n not in NOT_HERE])
    add_piece_flags(p, PerformanceConfig, study, only=PERFORMANCE)
    p.add_argument("--dummy", action="store_true", help="random images, no files (seed 001)")
    p.add_argument("--dummy-size", type=int, default=IMAGENET_TRAIN, help="samples per --dummy epoch")
    p.add_argument("--val-path", help="validate each epoch: the folder of the val split")
    add_piece_flags(p, WorkerConfig, only=WORKER)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--lr-schedule", default="step", choices=["step", "cosine", "constant"])
    p.add_argument("--lr-step-epochs", type=int, default=30, help="step: x gamma every N epochs")
    p.add_argument("--lr-gamma", type=float, default=0.1)
    g = p.add_argument_group("checkpoints")
    add_piece_flags(g, CheckpointConfig, study, aliases={"checkpoint_path": ("--checkpoints-path",)})
    g.add_argument("--keep-checkpoints", type=int, default=2)
    resume = g.add_mutually_exclusive_group()
    resume.add_argument("--resume", action="store_true", help="from the newest valid checkpoint")
    resume.add_argument("--resume-or-start", action="store_true",
                        help="resume if there is a checkpoint, else start fresh")
    add_piece_flags(p.add_argument_group("fault injection"), FaultInjectionConfig, study)
    d = p.add_argument_group("distributed")
    d.add_argument("--dist-init-method", default="torchrun", choices=["torchrun", "slurm"],
                   help="torchrun's variables (none: one process), or srun's SLURM_* (seed 001)")
    d.add_argument("--timeout", type=float, default=300.0, help="seconds, rendezvous and collectives")
    d.add_argument("--log-dir", help="each rank appends to <log-dir>/rank<R>.log")
    d.add_argument("--result", help="rank 0 writes the run's result here (JSON)")
    return p


def resolve_env(method: str) -> DistEnv:
    if method == "slurm":
        if not {"SLURM_PROCID", "SLURM_NTASKS"} <= os.environ.keys():
            raise UsageError("dist_init_method: slurm needs SLURM_PROCID and SLURM_NTASKS; start "
                             "the ranks with srun, or use torchrun")
        return resolve({k: v for k, v in os.environ.items()
                        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")})
    return resolve(local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def restart_count() -> int:
    """How many times this job's ranks were started before: torchrun's restarts plus a
    requeued Slurm job's (the same on every rank of an attempt)."""
    return sum(int(os.environ.get(name) or 0)
               for name in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"))


def _class_folders(path: str, split: str) -> Path:
    """ImageNet's layout (PATH/train/<class>/), benchlib's generated one
    (PATH/imagefolder/train/<class>/), or PATH itself holding the class folders."""
    root = paths.resolve(path)
    for candidate in (root / "imagefolder" / split, root / split, root):
        if candidate.is_dir() and any(p.is_dir() for p in candidate.iterdir()):
            return candidate
    raise UsageError(f"path: {root} has no class folders of images ({split}/<class>/*.JPEG)")


def build_data(args: argparse.Namespace):
    """(train set, validation set or None, collate_fn, shape of one input)."""
    from torch.utils.data import default_collate
    from torchvision.datasets import FashionMNIST, ImageFolder
    from torchvision.transforms import ToTensor

    from benchlib.data import datasets, dummy, manifest, storage, transforms
    from benchlib.trainers import job

    path = args.data or args.path
    if args.dummy:
        if args.val_path:
            raise UsageError("val_path: --dummy has no validation set; leave --val-path out")
        shape = (1, 28, 28) if args.model == "toynet" else (3, args.image_size, args.image_size)
        classes = 1000 if args.model.startswith("resnet") else 10
        return (dummy.DummyImages(args.dummy_size, shape, classes, args.seed), None,
                storage.passthrough, shape)
    if args.dataset == "imagefolder":
        shape = (3, args.image_size, args.image_size)
        train = ImageFolder(_class_folders(path, "train"),
                            transforms.imagefolder(args.image_size, args.augment))
        val = ImageFolder(_class_folders(args.val_path, "val"),
                          transforms.imagefolder(args.image_size, augment=False)) \
            if args.val_path else None
        return train, val, default_collate, shape
    train, collate, shape = job.build_dataset(args.dataset, path, args.augment)
    if not args.val_path:
        return train, None, collate, shape
    if args.dataset == "mydataset":
        raise UsageError("val_path: mydataset has no validation split; validate with "
                         "fashion-mnist, cifar10 or imagefolder")
    root = paths.resolve(args.val_path)
    if args.dataset == "cifar10":
        val = datasets.cifar10(root, train=False, transform=transforms.cifar10(augment=False))
    else:
        manifest.describe(root, "fashion-mnist")
        val = FashionMNIST(str(root), train=False, download=False, transform=ToTensor())
    return train, val, collate, shape


def preflight(args: argparse.Namespace, env: DistEnv) -> elastic.Plan:
    """Everything a rank checks alone, before it joins the others: bad input ends here
    (exit code 2), before a process group exists or a step runs."""
    import torch

    from benchlib.core import entrypoints
    from benchlib.core.models import build_model

    check_own_code(args, any_dataset=False)  # the data sets are the flag's choices
    for name in ("epochs", "batch_size", "keep_checkpoints", "dummy_size", "lr_step_epochs"):
        require_min(name, getattr(args, name), 1)
    for name in ("max_steps", "num_workers", "warmup_steps"):
        require_min(name, getattr(args, name), 0)
    check_faults(args)
    check_checkpoint(args)
    if args.fail_at_step and not 0 <= args.fail_rank < env.world_size:
        raise ConfigError("fail_rank", f"must be in [0, {env.world_size}), got {args.fail_rank}")
    folder = checkpoint.check_writable(paths.resolve(args.checkpoint_path))
    restarts = restart_count()
    found = checkpoint.latest(folder)
    resuming = args.resume or args.resume_or_start or restarts > 0
    if found is not None and resuming:
        checkpoint.check_compatible(found, model=args.model, world_size=env.world_size,
                                    batch_size=args.batch_size, seed=args.seed,
                                    dataset="dummy" if args.dummy else args.dataset)
    elif found is None and args.resume and restarts == 0:
        raise UsageError(f"resume: no usable checkpoint in {folder}; pass --resume-or-start "
                         "instead to start fresh when there is none")
    elif found is not None:
        raise UsageError(f"checkpoint_path: {folder} already holds a checkpoint (step "
                         f"{found.step}); pass --resume to continue that run, or give an empty folder")
    if env.rank == 0:
        for stale in checkpoint.clean_temporaries(folder):
            print(f"removed {stale}, left by a writer that was killed", flush=True)
    train_set, val_set, collate, shape = build_data(args)
    torch.manual_seed(args.seed)  # the same initial weights on every rank and every run
    model = build_model(args.model, shape, args.depth, args.alpha, model_args=args.model_args,
                        num_classes=args.num_classes)
    loss = entrypoints.load("loss", args.loss) if args.loss else None
    return elastic.Plan(args, env, folder, found if resuming else None, restarts, train_set,
                        val_set, collate, model, loss)


def join(env: DistEnv, backend: str, timeout_s: float, restarts: int) -> None:
    """group.init, except under a torchrun agent that shares its store with the workers
    (TORCHELASTIC_USE_AGENT_STORE): that store outlives a restart, and a restarted rank
    can read the address a dead rank published there in the attempt before and fail
    with "connection refused" (pytorch/pytorch#135712; seen here with torch 2.14 on a
    one-node restart).
    Each attempt's keys get a prefix of their own."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        init(env, backend, timeout_s)
        return
    from datetime import timedelta

    import torch.distributed as td

    timeout = timedelta(seconds=timeout_s)
    agent_store = td.TCPStore(env.master_addr, env.master_port, is_master=False, timeout=timeout)
    td.init_process_group(backend, store=td.PrefixStore(f"benchlib/restart{restarts}", agent_store),
                          rank=env.rank, world_size=env.world_size, timeout=timeout)


class Elastic(Worker):
    """Its place in the bootstrap (benchlib.workers.bootstrap): the rank from torchrun's or
    srun's variables; a restarted rank appends to its log and clears the failure marker of
    the attempt before (it was recovered from); the checkpoints are checked before the
    rank joins the others; SIGTERM stops it at the next step boundary (exit 75)."""

    prog = PROG

    def parser(self) -> argparse.ArgumentParser:
        return parser()

    def check(self, args: argparse.Namespace) -> None:
        args.dummy = args.dummy or args.dataset == "dummy"  # one data set, two spellings
        if args.precision in FP8_RECIPES:  # its loop converts no linear
            raise ConfigError("precision", f"{args.precision} is the ddp trainers' (notebooks 40, "
                              "50 and 55); the elastic trainer runs fp32, tf32, amp_bf16, amp_fp16")

    def find(self, args: argparse.Namespace) -> DistEnv:
        return resolve_env(args.dist_init_method)

    def place(self, args: argparse.Namespace, env: DistEnv) -> DistEnv:
        self.restarts = restart_count()
        if self.restarts:  # the failure before was recovered from: blame none of it
            protocol.clear_failed(args.log_dir, env.rank)
        self.preemption = PreemptionFlag()
        self.preemption.install()
        return env

    def describe(self, args: argparse.Namespace, env: DistEnv) -> str:
        return (f"from {env.source}, master {env.master_addr}:{env.master_port}, "
                f"restart {self.restarts}, pid {os.getpid()}")

    def work(self, args: argparse.Namespace, env: DistEnv) -> dict:
        plan = preflight(args, env)
        device = device_for(args.device, env.local_rank)
        backend = choose_backend(device.type, args.backend)
        check_precision(args.precision, device.type)
        if env.world_size > 1:
            join(env, backend, args.timeout, self.restarts)
            print(f"{protocol.JOINED} ({backend})", flush=True)
        return elastic.train(plan, device, backend, self.preemption)


if __name__ == "__main__":
    raise SystemExit(run(Elastic()))
