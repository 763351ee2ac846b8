"""The Lightning trainer behind `python -m benchlib.workers.lightning` (seed 000's
lightning_multinode.py): DDP over `devices` processes on each of `nnodes` nodes.

Lightning runs several processes three ways, and each works here:

    torchrun   `torchrun --nnodes M --nproc-per-node K -m benchlib.workers.lightning ...`
               starts every rank (TorchElasticEnvironment)
    srun       `srun --nodes M --ntasks-per-node K python -m benchlib.workers.lightning ...`
               starts every rank (SLURMEnvironment); tasks per node must equal devices
    Lightning  one `python -m benchlib.workers.lightning ...` per node, with MASTER_ADDR,
               MASTER_PORT and NODE_RANK set and no LOCAL_RANK (LightningEnvironment):
               it is the node's local rank 0 and starts local ranks 1..K-1 itself by
               running the same command line again with LOCAL_RANK set

The worker (benchlib.workers.lightning) finds each process's rank and checks the
launcher's layout before Lightning starts; `fit` trains, and hands any failure to the
worker's bootstrap at once.

Repeats: one fit of `epochs x repeats` epochs in which every epoch is one sample of the
spread. Lightning's own launcher can start its local ranks only once per process, and a
fresh fit would time the process-group start-up again; warm-up steps are left out at the
start of every epoch, so each epoch is a steady-state measurement on its own. The
details say which repeat and epoch each sample is.

Timing is benchlib.trainers.ddp's: `data_s` runs from the end of one step to Lightning's
on_train_batch_start (fetching the batch, moving it to the device, Lightning's per-step
bookkeeping), `compute_s` from there to on_train_batch_end (forward, backward, DDP's
all-reduce, optimizer step); global samples/s = the samples all ranks processed over the
slowest rank's summed step time. One rank (world size 1) runs without DDP, as in
benchlib.trainers.ddp, so that it is the baseline of a speedup.
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

import lightning
import lightning.pytorch as pl
import torch
from torch import nn

from benchlib.config import choices
from benchlib.core import energy, envinfo, loops, memory, throughput
from benchlib.core.timing import StepMarks
from benchlib.distributed.device import check_device
from benchlib.distributed.group import barrier_and_destroy, gather_objects
from benchlib.distributed.lightning_env import Layout
from benchlib.errors import InjectedFailure, RankError, UsageError
from benchlib.launch import protocol
from benchlib.trainers.job import Job, build_job

# what a failure is handed to, with the Trainer when there is one (its local ranks)
OnFailure = Callable[[BaseException, "pl.Trainer | None"], NoReturn]
_IMPORTED_AT = time.time()  # torch and Lightning are imported by now


def use_cuda(device: str, devices: int) -> bool:
    """cpu, gpu or auto; `gpu` without CUDA, or fewer GPUs than devices, is refused."""
    check_device(device)
    cuda = device == "gpu" or (device == "auto" and torch.cuda.is_available())
    if cuda and devices > torch.cuda.device_count():
        raise UsageError(f"devices: {devices} GPUs per node, but this process sees "
                         f"{torch.cuda.device_count()} (CUDA_VISIBLE_DEVICES="
                         f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); under Slurm every "
                         "task must see all GPUs of its node (--gpus-per-node, not "
                         "--gpus-per-task)")
    return cuda


class BenchModule(pl.LightningModule):
    """A job's model (benchlib.trainers.job), trained with SGD on its objective
    (cross-entropy unless told). Its data comes from `make_loader(device, rank)`, called
    once Lightning has placed the module."""

    def __init__(self, model: nn.Module, make_loader: Callable[[torch.device, int], Any],
                 lr: float, momentum: float, fail_at_step: int = 0, fail_rank: int = 0,
                 objective: loops.Objective | None = None):
        super().__init__()
        self.model, self.make_loader = model, make_loader
        self.lr, self.momentum = lr, momentum
        self.fail_at_step, self.fail_rank = fail_at_step, fail_rank
        self.objective = objective or loops.Objective()
        self.steps = 0

    def train_dataloader(self):
        return self.make_loader(self.device, self.global_rank)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.steps += 1
        if self.steps == self.fail_at_step and self.global_rank == self.fail_rank:
            raise InjectedFailure(f"injected failure at step {self.steps} on rank {self.global_rank}")
        return self.objective(self.model, x, y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.model.parameters(), lr=self.lr, momentum=self.momentum)


class ThroughputTimer(pl.Callback):
    """Times every step on the device's timeline (benchlib.core.timing.StepMarks), leaves the
    first `warmup_steps` of each epoch out, and at each epoch's end gathers every rank's
    figures: rank 0 keeps one record per epoch in `epochs`. From the start of training to
    its end it also watches the device's utilisation and the peak memory
    (benchlib.core.memory), read while the module and optimizer are still in place."""

    def __init__(self, warmup_steps: int, epochs_per_repeat: int, prefetched: int = 0):
        self.warmup_steps, self.epochs_per_repeat = warmup_steps, epochs_per_repeat
        self.prefetched = prefetched  # batches the loader's workers fetch at start-up
        self.epochs: list[dict[str, Any]] = []
        self.startup: dict[str, float] = {}
        self.utilisation: dict[str, Any] = {}
        self.memory: dict[str, Any] = {}

    def setup(self, trainer, pl_module, stage):
        import torch.distributed as dist

        self.marks = StepMarks(pl_module.device)
        if dist.is_available() and dist.is_initialized():
            self.startup["joined_at"] = time.time()
            print(f"{protocol.JOINED} ({dist.get_backend()})", flush=True)

    def on_train_start(self, trainer, pl_module):
        import psutil

        self.startup.update(process_started_at=psutil.Process().create_time(),
                            imported_at=_IMPORTED_AT, first_step_at=time.time())
        watched = pl_module.device.type == "cuda" and trainer.global_rank == 0
        # the utilisation of the timed steps (NVML by UUID), as the DDP trainer samples it;
        # the meter only marks the window's edges here: Lightning's runs meter no energy
        self.window = energy.EnergyMeter([])
        self.sampler = energy.UtilisationSampler(
            energy.device_uuids([pl_module.device.index]) if watched else [], self.window)
        self.sampler.start()
        self.peak = memory.PeakMemory(pl_module.device)  # the device is current by now
        self.peak.reset()

    def on_train_end(self, trainer, pl_module):
        peaks = self.peak.read()
        self.utilisation = self.sampler.stop()
        self.memory = memory.record_figures(peaks, pl_module.model, trainer.optimizers[0])

    def on_train_epoch_start(self, trainer, pl_module):
        self.marks.wait()  # nothing queued before the epoch counts towards it
        self.epoch_start = time.perf_counter()
        self.ends, self.handed, self.samples, self.loss = [self.marks.mark()], [], [], None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        # the timed steps begin where samples/s's window does (throughput.window_start)
        if batch_idx == throughput.window_start(self.warmup_steps, self.prefetched,
                                                trainer.num_training_batches):
            self.window.timed()
        self.handed.append(self.marks.mark())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.ends.append(self.marks.mark())
        self.samples.append(len(batch[1]))
        self.loss = outputs["loss"].detach()

    def on_train_epoch_end(self, trainer, pl_module):
        self.window.untimed()
        self.marks.wait()
        epoch_s = time.perf_counter() - self.epoch_start
        data_s = [self.marks.seconds(b, h) for b, h in zip(self.ends, self.handed)]
        compute_s = [self.marks.seconds(h, e) for h, e in zip(self.handed, self.ends[1:])]
        mine = throughput.rank_share(self.samples, data_s, compute_s, epoch_s,
                                     self.loss.item(), self.warmup_steps,
                                     prefetched=self.prefetched,
                                     **_data_set_epoch(trainer.train_dataloader))
        everyone = gather_objects(mine)
        if trainer.global_rank != 0:
            return
        index = len(self.epochs)
        self.epochs.append({"repeat": index // self.epochs_per_repeat,
                            "epoch": index % self.epochs_per_repeat,
                            **throughput.across_ranks(everyone)})


def _data_set_epoch(loader: Any) -> dict[str, int]:
    """This rank's epoch of its data (steps, samples), whatever `limit_train_batches` cut:
    what a run that stopped short projects its whole epoch from; {} where unknown."""
    try:
        return {"full_steps": len(loader), "full_samples": len(loader.sampler)}
    except (TypeError, AttributeError):
        return {}


class FailFast(pl.Callback):
    """A rank whose step raised hands the error to `on_failure` at once (the worker's
    bootstrap: traceback into its log, `rank<R>.failed`, the local ranks it started
    stopped, exit), rather than wait in a collective for ranks that will never come."""

    def __init__(self, on_failure: OnFailure):
        self.on_failure = on_failure

    def on_exception(self, trainer, pl_module, exception):
        self.on_failure(exception, trainer)


def local_ranks(trainer: pl.Trainer | None) -> list:
    """The local ranks Lightning's launcher started from this process (way 3 only)."""
    launcher = getattr(trainer.strategy, "launcher", None) if trainer is not None else None
    return list(getattr(launcher, "procs", []))


def build_trainer(args: argparse.Namespace, where: Layout, cuda: bool,
                  callbacks: list[pl.Callback]) -> pl.Trainer:
    from lightning.pytorch.plugins.environments import SLURMEnvironment
    from lightning.pytorch.strategies import DDPStrategy

    strategy: Any = "auto"  # one rank: no DDP, as benchlib.trainers.ddp's baseline
    if where.world_size > 1:
        strategy = DDPStrategy(process_group_backend="nccl" if cuda else "gloo",
                               timeout=timedelta(seconds=args.timeout))
    # a measurement is not resumed: no checkpoint and requeue when Slurm signals the end
    plugins = [SLURMEnvironment(auto_requeue=False)] \
        if where.environment == "SLURMEnvironment" else None
    return pl.Trainer(accelerator="gpu" if cuda else "cpu", devices=where.devices,
                      num_nodes=where.nnodes, strategy=strategy, plugins=plugins,
                      max_epochs=args.epochs * args.repeats,
                      limit_train_batches=args.max_steps or 1.0, use_distributed_sampler=True,
                      enable_checkpointing=False, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, num_sanity_val_steps=0, callbacks=callbacks)


def make_loader_factory(args: argparse.Namespace, job: Job) -> Callable:
    def make(device: torch.device, rank: int):
        if job.dataset is None:  # synthetic: made on the device, no IO, no copy
            return job.synthetic(args.batch_size, args.max_steps or choices.SYNTHETIC_STEPS,
                                 device, args.seed + rank)
        # shuffled; Lightning swaps in a DistributedSampler (seeded by seed_everything)
        return loops.make_loader(job.dataset, job.collate, args.batch_size, args.num_workers,
                                 device, args.seed)
    return make


def fit(args: argparse.Namespace, where: Layout, cuda: bool, on_failure: OnFailure) -> dict | None:
    """Train; rank 0 returns the result, the other ranks None. A failure, inside fit or
    in a local rank this process started, goes to `on_failure` (which does not return)."""
    pl.seed_everything(args.seed, verbose=False)
    job = build_job(args)
    if job.own:  # a model that does not fit the labels: one line, exit 2
        job.check(args.model)
    model = job.model
    flops = job.flop_figures()
    # fp32 means fp32, as in the DDP trainer's step (benchlib.core.loops.Stepper): PyTorch's
    # default runs cuDNN convolutions in TF32, which made Lightning look 1.8x faster than
    # the DDP trainer on one H100
    loops.set_matmul_precision("fp32")
    module = BenchModule(model, make_loader_factory(args, job), args.lr, args.momentum,
                         args.fail_at_step, args.fail_rank, job.objective)
    timer = ThroughputTimer(args.warmup_steps, args.epochs, loops.PREFETCH_FACTOR
                            * args.num_workers if job.dataset is not None else 0)
    trainer = build_trainer(args, where, cuda, [timer, FailFast(on_failure)])
    chosen = getattr(trainer.strategy, "cluster_environment", None)
    if chosen is not None and type(chosen).__name__ != where.environment:
        raise UsageError(f"cluster environment: Lightning chose {type(chosen).__name__}; "
                         "benchlib runs under torchrun, srun or Lightning's own launcher")
    try:
        fit_s = _fit_and_leave(trainer, module, timer, where, args.timeout)
    except BaseException as e:  # noqa: BLE001 - errors inside fit already ended in FailFast
        on_failure(e, trainer)
    if where.rank != 0:
        return None
    metrics = {**_metrics(args, where, trainer, model, timer), **job.described,
               **flops, "fit_s": fit_s}
    return {"metrics": metrics, "details": {"epochs": timer.epochs, "host": socket.gethostname(),
                                            "startup_rank0": startup_breakdown(timer.startup)}}


def _fit_and_leave(trainer: pl.Trainer, module: BenchModule, timer: ThroughputTimer,
                   where: Layout, timeout_s: float) -> float:
    """trainer.fit, then every rank leaves the process group together and the local ranks
    this process started are waited for; the seconds fit took."""
    # (peak memory is reset in ThroughputTimer.on_train_start, not here: before fit no
    # device is current, and it would open a CUDA context on GPU 0 in every rank)
    timer.startup["fit_called_at"] = time.time()
    trainer.fit(module)
    fit_s = time.time() - timer.startup["fit_called_at"]
    if trainer.global_rank != where.rank or trainer.world_size != where.world_size:
        raise RankError(f"Lightning placed this process at rank {trainer.global_rank}/"
                        f"{trainer.world_size}, benchlib expected {where.rank}/{where.world_size}")
    barrier_and_destroy()  # nobody leaves while another rank is still in a collective
    for child in local_ranks(trainer):  # Lightning's launcher: this node's other ranks
        if (code := child.wait(timeout_s)) != 0:
            raise RankError(f"local rank process {child.pid} exited with code {code}")
    return fit_s


def _metrics(args: argparse.Namespace, where: Layout, trainer: pl.Trainer, model: nn.Module,
             timer: ThroughputTimer) -> dict[str, Any]:
    # the strategy's device: after fit Lightning has moved the module back to the CPU
    device = trainer.strategy.root_device
    return {
        **throughput.run_figures(timer.epochs),
        "world_size": where.world_size, "nnodes": where.nnodes, "devices_per_node": where.devices,
        "global_batch": args.batch_size * where.world_size,
        "backend_used": trainer.strategy.process_group_backend if where.world_size > 1 else None,
        "strategy": "ddp" if where.world_size > 1 else "single_device",
        "cluster_environment": where.environment,
        "lightning_version": lightning.__version__,
        "device_name": envinfo.device_name(device),
        **timer.memory,  # the training window's peaks, and where they went
        "model_params": sum(p.numel() for p in model.parameters()),
        "threads_per_rank": torch.get_num_threads(),
        "startup_s": timer.startup["first_step_at"] - timer.startup["process_started_at"],
        # DDP's own all-reduce, untimed under Lightning
        **({"comm_unknown": "Lightning's DDP all-reduce is not timed"}
           if where.world_size > 1 else {}),
        **timer.utilisation,
    }


def startup_breakdown(t: dict[str, float]) -> dict[str, float]:
    """Rank 0's seconds from its process start to its first step: importing torch and
    Lightning; building data, model and Trainer; Lightning starting the local ranks (its
    own launcher) and joining the process group; wrapping the model and the loader."""
    joined = t.get("joined_at", t["fit_called_at"])
    return {"imports_s": t["imported_at"] - t["process_started_at"],
            "prepare_s": t["fit_called_at"] - t["imported_at"],
            "launch_and_join_s": joined - t["fit_called_at"],
            "to_first_step_s": t["first_step_at"] - joined}
