"""The elastic trainer's loop (seed 001's imagenet_elastic_trainer.py, done so that an
interrupted run ends where an uninterrupted one does).

What makes a resumed run take the same steps as one that never stopped:
- the data order of an epoch is a function of (seed, epoch) only: DistributedSampler
  with `set_epoch`; a resume in mid-epoch drops the batches that epoch already trained
  on from the sampler's index list instead of drawing them again;
- the checkpoint holds the model, optimizer, LR scheduler (stepped once per step),
  gradient scaler, the position (epoch, batch, step), best metric, and every rank's RNG
  states; with `--num-workers 0` even random augmentations repeat exactly (with loader
  workers, the augmentation draws after a mid-epoch resume differ);
- each DataLoader has its own generator seeded by the epoch, so creating one does not
  move the global RNG.

At every step boundary the ranks all-reduce [loss, preemption flag]: one small
collective gives the rank-averaged loss and lets all ranks agree to stop together when
any of them got SIGTERM. A preempted run writes a checkpoint and exits with
PREEMPTED_EXIT_CODE (75, EX_TEMPFAIL: "try again"); it writes no result record.

Checkpoints are saved in the mode `--checkpoint` names (torch.save, DCP, async DCP:
benchlib.trainers.saver); a run resumes from either kind. Rank 0 appends every step and
event to `<checkpoints>/timeline.jsonl`, across attempts, so the last attempt can report
restarts, steps redone, recovery and restore time, and what each save cost, for all of
them (benchlib.trainers.elastic_timeline).
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler

from benchlib.core import delays, envinfo, loops, memory
from benchlib.core.checkpoint_cost import ASYNC_MODES
from benchlib.distributed.env import DistEnv
from benchlib.distributed.group import gather_objects
from benchlib.errors import Preempted
from benchlib.launch import protocol
from benchlib.trainers import checkpoint, ddp
from benchlib.trainers.elastic_timeline import Timeline, read_timeline, summarize_run
from benchlib.trainers.preemption import PreemptionFlag, agree, ignore_sigterm
from benchlib.trainers.saver import Saver


@dataclass
class Position:
    """Where training stands after a step: the next batch to train on is batch `batch`
    of epoch `epoch`; `step` optimizer steps are done."""

    epoch: int = 0
    batch: int = 0
    step: int = 0
    best_acc1_pct: float | None = None  # None until a validation ran (seed 001 left it unbound)


def _scheduler(name: str, optimizer, steps_per_epoch: int, epochs: int, step_epochs: int,
               gamma: float):
    """Stepped once per optimizer step, so its state always matches the step count,
    also in mid-epoch. `step` is seed 001's StepLR (x gamma every `step_epochs` epochs)."""
    from torch.optim import lr_scheduler

    if name == "cosine":
        return lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps_per_epoch * epochs, 1))
    if name == "step":
        return lr_scheduler.StepLR(optimizer, step_size=steps_per_epoch * step_epochs, gamma=gamma)
    return lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=0)


# ---------------------------------------------------------------- the loop


@dataclass
class Plan:
    """What a rank checked and built on its own before joining the others."""

    args: Any  # the worker's argparse.Namespace
    env: DistEnv
    folder: Path  # the checkpoints folder, known to be writable
    resume: checkpoint.Checkpoint | None
    restart_count: int  # torchrun's (or Slurm's) restarts of this job so far
    train_set: Dataset
    val_set: Dataset | None
    collate: Any
    model: torch.nn.Module
    loss: Any = None  # the user's loss function (`loss: pkg.module:function`); None: cross-entropy


def _log(env: DistEnv, message: str) -> None:
    if env.rank == 0:
        print(message, flush=True)


def _failing(plan: Plan, step: int) -> bool:
    """--fail-at-step K --fail-rank R: this rank is to die after step K (the first attempt
    only, so the restarted run can finish)."""
    args = plan.args
    return args.fail_at_step == step and plan.env.rank == args.fail_rank and not plan.restart_count


def _inject_failure(plan: Plan, step: int) -> None:
    """Rank R dies after step K the way a lost node or the OOM killer kills it (SIGKILL:
    no handler, no cleanup); where step K starts an asynchronous save, inside its
    background write instead (benchlib.trainers.saver)."""
    if _failing(plan, step):
        print(f"injected failure: rank {plan.env.rank} kills itself after step {step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


@torch.no_grad()
def _validate(plan: Plan, model: torch.nn.Module, stepper: loops.Stepper) -> float:
    """Top-1 accuracy (%) over the whole validation set: each rank takes every
    world_size-th sample (no padding, so nothing counts twice), counts are summed. The
    plain module runs it: DDP's forward could start a collective the others never join."""
    env, args = plan.env, plan.args
    part = Subset(plan.val_set, range(env.rank, len(plan.val_set), env.world_size))
    loader = DataLoader(part, batch_size=args.batch_size, num_workers=args.num_workers,
                        collate_fn=plan.collate, generator=torch.Generator().manual_seed(0),
                        worker_init_fn=ignore_sigterm)
    counts = torch.zeros(2, dtype=torch.float64, device=stepper.device)
    model.eval()
    for x, y in loader:
        x, y = x.to(stepper.device), y.to(stepper.device)
        with torch.autocast(stepper.device.type, dtype=stepper.autocast,
                            enabled=stepper.autocast is not None):
            counts[0] += (model(x).argmax(1) == y).sum()
        counts[1] += len(y)
    model.train()
    if env.world_size > 1:
        dist.all_reduce(counts)
    return 100.0 * counts[0].item() / max(counts[1].item(), 1)


class ElasticTrainer:
    """One attempt of a run: restore the plan's checkpoint (if any), train to the last
    epoch, checkpoint on the way; `run()` returns rank 0's record of the whole run."""

    def __init__(self, plan: Plan, device: torch.device, backend: str,
                 preemption: PreemptionFlag):
        self.plan, self.args, self.env = plan, plan.args, plan.env
        self.device, self.backend, self.preemption = device, backend, preemption
        args, env = self.args, self.env
        self.model, _ = ddp.wrap(plan.model, "ddp", device, env)
        self.plain = plan.model  # without DDP: what a checkpoint stores, what validates
        self.stepper = loops.Stepper("train", device, self.model, lr=args.lr,
                                     momentum=args.momentum, precision=args.precision,
                                     channels_last=args.channels_last,
                                     delay=delays.StepDelay.of_rank(
                                         args.inject_step_delay_ms, device, args.inject_delay_pattern,
                                         args.warmup_steps, args.delay_rank, env.rank, env.world_size),
                                     objective=loops.Objective(plan.loss))
        self.optimizer = self.stepper.optimizer
        for group in self.optimizer.param_groups:  # Stepper's SGD has none; seed 001 used 1e-4
            group["weight_decay"] = args.weight_decay
        self.sampler = DistributedSampler(plan.train_set, num_replicas=env.world_size,
                                          rank=env.rank, shuffle=True, seed=args.seed)
        self.steps_per_epoch = math.ceil(len(self.sampler) / args.batch_size)
        if args.max_steps:
            self.steps_per_epoch = min(self.steps_per_epoch, args.max_steps)
        self.scheduler = _scheduler(args.lr_schedule, self.optimizer, self.steps_per_epoch,
                                    args.epochs, args.lr_step_epochs, args.lr_gamma)
        self.pos = Position()
        self.saver = Saver(args.checkpoint, plan.folder, args.keep_checkpoints, args.timeout)
        resumed = plan.resume is not None
        if resumed:
            self._restore(plan.resume)
        checkpoint.check_same_step(self.pos.step if resumed else None, env)
        self.timeline = Timeline(plan.folder, env.rank == 0,
                                 fresh=not resumed and plan.restart_count == 0)
        self.timeline.write("start", restart_count=plan.restart_count, world_size=env.world_size,
                            resumed_from_step=self.pos.step if resumed else None,
                            restore_s=self.saver.restores[-1] if resumed else None)

    def _restore(self, found: checkpoint.Checkpoint) -> None:
        """The model, optimizer, schedule, scaler, position and this rank's RNG states, from
        a checkpoint of either kind (a torch.save one: every rank reads the file)."""
        state = self.saver.restore(found, self.plain, self.optimizer)
        self.scheduler.load_state_dict(state["scheduler"])
        if self.stepper.scaler is not None and state.get("scaler"):
            self.stepper.scaler.load_state_dict(state["scaler"])
        self.pos = Position(**state["position"])
        checkpoint.set_rng_state(state["rng"][self.env.rank], self.device)
        print(f"resumed from {found.path}: step {self.pos.step}, epoch {self.pos.epoch}, batch "
              f"{self.pos.batch} of {self.steps_per_epoch} ({self.saver.restores[-1]:.2f} s to "
              "restore)", flush=True)

    def _save(self, die_in_write: bool = False) -> Path:
        """All ranks hand every rank's RNG states to the state; each saves as its mode does
        (benchlib.trainers.saver); training goes on once the save lets it."""
        args, env, pos = self.args, self.env, self.pos
        started = time.perf_counter()  # the gather is the save's too: every rank waits there
        rngs = gather_objects(checkpoint.rng_state(self.device))
        meta = {"step": pos.step, "epoch": pos.epoch, "batch": pos.batch, "model": args.model,
                "dataset": "dummy" if args.dummy else args.dataset,
                "world_size": env.world_size, "batch_size": args.batch_size,
                "seed": args.seed, "best_acc1_pct": pos.best_acc1_pct}
        scaler = self.stepper.scaler
        extra = {"scheduler": self.scheduler.state_dict(), "rng": rngs, "position": asdict(pos),
                 "scaler": scaler.state_dict() if scaler is not None else None}
        save = self.saver.save(pos.step, self.plain, self.optimizer, extra, meta, die_in_write,
                               started)
        self._saved()
        _log(env, f"checkpoint at step {pos.step} ({args.checkpoint}): training waited "
                  f"{save.blocking_s:.2f} s")
        return self.plan.folder / f"step-{pos.step:08d}{'.pt' if args.checkpoint == 'torch_save' else ''}"

    def _saved(self) -> None:
        """The saves completed since the last step boundary, each a timeline event."""
        for save in self.saver.poll():
            self.timeline.write("checkpoint", mode=self.args.checkpoint, **save.event())

    def _validate_epoch(self, epoch: int) -> None:
        acc1 = _validate(self.plan, self.plain, self.stepper)
        pos = self.pos
        if pos.best_acc1_pct is None or acc1 > pos.best_acc1_pct:
            pos.best_acc1_pct = acc1
            if self.env.rank == 0:
                checkpoint.save_best(self.plan.folder, self.plain.state_dict(),
                                     {"step": pos.step, "epoch": epoch, "acc1_pct": acc1})
        self.timeline.write("validate", epoch=epoch, step=pos.step, acc1_pct=acc1)
        _log(self.env, f"epoch {epoch}: acc1 {acc1:.2f}% (best {pos.best_acc1_pct:.2f}%)")

    def _loader(self, epoch: int, first: int):
        """The epoch's batches from batch `first` on: the sampler's order for this epoch
        without the indices already trained on."""
        args = self.args
        self.sampler.set_epoch(epoch)
        indices = list(self.sampler)[first * args.batch_size:]
        return iter(DataLoader(self.plan.train_set, batch_size=args.batch_size, sampler=indices,
                               num_workers=args.num_workers, collate_fn=self.plan.collate,
                               pin_memory=self.device.type == "cuda",
                               worker_init_fn=ignore_sigterm,
                               generator=torch.Generator().manual_seed(args.seed + epoch)))

    def _run_batch(self, epoch: int, batch: int, batches) -> None:
        """One step, then at its boundary: record it, and checkpoint, validate or stop."""
        args, env = self.args, self.env
        start = time.perf_counter()
        x, y = next(batches)
        handed = time.perf_counter()
        self.stepper.delay.at(epoch, batch)  # an injected pattern's place (never a real run)
        loss = self.stepper(x, y)
        self.scheduler.step()
        mean_loss, stop = agree(loss, self.preemption.requested_at is not None, env)
        step_s = time.perf_counter() - start
        end_of_epoch = batch + 1 == self.steps_per_epoch
        self.pos = Position(epoch + 1 if end_of_epoch else epoch, 0 if end_of_epoch else batch + 1,
                            self.pos.step + 1, self.pos.best_acc1_pct)
        step, samples = self.pos.step, len(y) * env.world_size
        self.timeline.write("step", epoch=epoch, step=step, loss=mean_loss, step_s=step_s,
                            data_s=handed - start, samples=samples,
                            writing=self.saver.in_flight())
        self._saved()
        if args.log_interval and step % args.log_interval == 0:
            _log(env, f"epoch {epoch} batch {batch + 1}/{self.steps_per_epoch} step {step}: "
                      f"loss {mean_loss:.4f}, {samples / step_s:.1f} samples/s")
        saving = end_of_epoch or (args.checkpoint_every and step % args.checkpoint_every == 0)
        in_write = saving and not stop and args.checkpoint in ASYNC_MODES
        if not in_write:
            _inject_failure(self.plan, step)
        if stop:
            path = self._save()
            self.saver.close()  # durable before the exit
            self._saved()
            self.timeline.write("preempted", step=step)
            self.timeline.close()
            stopped = Preempted(step, path)
            protocol.note_checkpoint(str(stopped))  # so the agent may say "checkpoint"
            raise stopped
        if end_of_epoch and self.plan.val_set is not None:
            self._validate_epoch(epoch)
        if saving:
            self._save(die_in_write=in_write and _failing(self.plan, step))

    def run(self) -> dict | None:
        first_epoch, first_batch = self.pos.epoch, self.pos.batch
        if first_epoch >= self.args.epochs:
            print(f"the run is complete: its checkpoint is step {self.pos.step}, the last of "
                  f"{self.args.epochs} epochs; nothing left to train", flush=True)
        peak = memory.PeakMemory(self.device)  # this attempt's training window
        peak.reset()
        for epoch in range(first_epoch, self.args.epochs):
            first = first_batch if epoch == first_epoch else 0
            batches = self._loader(epoch, first)
            for batch in range(first, self.steps_per_epoch):
                self._run_batch(epoch, batch, batches)
            del batches  # stops its loader workers
        figures = memory.record_figures(peak.read(), self.plain, self.optimizer)
        self.saver.close()  # the last save durable before the run counts as done
        self._saved()
        self.timeline.write("end", step=self.pos.step)
        self.timeline.close()
        return self._result(figures) if self.env.rank == 0 else None

    def _result(self, memory_figures: dict[str, Any]) -> dict:
        """The record of all attempts; its memory figures are this (the last) attempt's."""
        env, device = self.env, self.device
        events = read_timeline(self.timeline.path)
        metrics, rows = summarize_run(events, self.args.warmup_steps, self.args.checkpoint)
        metrics.update({
            "world_size": env.world_size, "global_batch": self.args.batch_size * env.world_size,
            "steps_per_epoch": self.steps_per_epoch, "epochs": self.args.epochs,
            "backend_used": self.backend if env.world_size > 1 else None,
            "device_name": envinfo.device_name(device),
            "model_params": sum(p.numel() for p in self.plain.parameters()),
            "threads_per_rank": torch.get_num_threads(),
            "resumed_from_step": self.plan.resume.step if self.plan.resume is not None else None,
            **memory_figures,  # the training window's peaks, and where they went
        })
        if self.args.inject_step_delay_ms:  # a straggler made on purpose: not the model's figures
            metrics.update(injected_step_delay_ms=self.args.inject_step_delay_ms,
                           injected_delay_rank=self.args.delay_rank,
                           injected_delay_pattern=self.args.inject_delay_pattern)
        return {"metrics": metrics, "details": {"restarts": rows, "timeline": events}}


def train(plan: Plan, device: torch.device, backend: str,
          preemption: PreemptionFlag) -> dict | None:
    """Run the plan to its last epoch; rank 0 returns the record of the whole run (all
    attempts), the others None. Raises Preempted, after the checkpoint, when any rank
    got SIGTERM."""
    return ElasticTrainer(plan, device, backend, preemption).run()
