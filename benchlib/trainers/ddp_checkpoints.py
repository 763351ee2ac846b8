"""The checkpoints of benchlib.trainers.ddp's runs (`--checkpoint-every N`): a save after
every N-th step in the mode `--checkpoint` names (benchlib.trainers.saver), what training
waited at each step boundary taken out of the next step's data time (the step loop would
count it as a wait for data), and at the end the restore: the newest checkpoint loaded
back RESTORES times over a scrambled model and optimizer, each time checked to give back
the state that was saved. The ddp trainer does not resume a run; this measures what
saving and restoring cost, and that the checkpoint holds the state."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from benchlib import paths
from benchlib.core import checkpoint_cost
from benchlib.errors import UsageError
from benchlib.trainers import checkpoint
from benchlib.trainers.saver import Saver, plain

RESTORES = 3  # restores timed at the end: a spread, from the page cache as a fresh restart's is not


@torch.no_grad()
def checksum(model: torch.nn.Module, optimizer) -> float:
    """The sum, in float64, of every parameter and optimizer state tensor (this rank's
    shards summed over the ranks for FSDP2): equal after a restore that gave the state back."""
    tensors = [*plain(model).parameters(),
               *(v for state in optimizer.state.values() for v in state.values()
                 if isinstance(v, torch.Tensor) and v.is_floating_point())]
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
    total = torch.stack([t.double().sum() for t in local]).sum().reshape(1)
    if any(hasattr(t, "to_local") for t in tensors) and dist.is_initialized():
        dist.all_reduce(total)  # each rank holds a shard: the state is their sum
    return total.item()


@torch.no_grad()
def scramble(model: torch.nn.Module, optimizer) -> None:
    """Change every parameter and optimizer state tensor, so that a restore has to write
    each of them back."""
    for p in plain(model).parameters():
        p.add_(1.0)
    for state in optimizer.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                v.add_(1.0)


class Checkpoints:
    """One run's saves, their stalls per step, and the restores at the end."""

    def __init__(self, args: Any, world_size: int, model: torch.nn.Module, optimizer):
        folder = checkpoint.check_writable(paths.resolve(args.checkpoint_path))
        if checkpoint.listed(folder):
            raise UsageError(f"checkpoint_path: {folder} already holds checkpoints of another "
                             "run; give an empty folder")
        self.args, self.world, self.model, self.optimizer = args, world_size, model, optimizer
        self.saver = Saver(args.checkpoint, folder, timeout_s=args.timeout)
        self.step = 0
        self.epoch: list[dict[str, Any]] = []  # this epoch's steps: the stall after each
        self.timed: list[dict[str, Any]] = []  # every timed step, for the rates
        self.stalled_s = self.wall_s = 0.0  # inside the epochs, and their wall time

    def _save(self) -> None:
        meta = {"step": self.step, "model": self.args.model, "world_size": self.world,
                "batch_size": self.args.batch_size, "seed": self.args.seed}
        self.saver.save(self.step, self.model, self.optimizer, {"position": {"step": self.step}},
                        meta)

    def after_step(self) -> None:
        """At each step boundary: settle a save whose write finished, save every N-th step;
        what it took is the step's stall."""
        start, writing = time.perf_counter(), self.saver.in_flight()  # before it is settled
        self.step += 1
        self.saver.poll()
        saved = self.step % self.args.checkpoint_every == 0
        if saved:
            self._save()
        self.epoch.append({"stall_s": time.perf_counter() - start, "writing": writing,
                           "saved": saved})

    def end_epoch(self, times, warmup_steps: int) -> None:
        """Take each stall out of the data time of the step after it (the loop counts the
        time between steps as a wait for data), and keep the timed steps for the rates."""
        for i, mark in enumerate(self.epoch[:-1]):
            times.data_s[i + 1] = max(0.0, times.data_s[i + 1] - mark["stall_s"])
        self.stalled_s += sum(mark["stall_s"] for mark in self.epoch)
        self.wall_s += times.epoch_s
        for i, mark in enumerate(self.epoch):
            if i >= warmup_steps:
                self.timed.append({**mark, "samples": times.samples[i] * self.world,
                                   "step_s": times.data_s[i] + times.compute_s[i]})
        self.epoch = []

    def events(self) -> list[dict[str, Any]]:
        """Each save as the record's details keep it (its bytes by rank among them)."""
        return [s.event() for s in self.saver.saves]

    def finish(self) -> dict[str, Any]:
        """The last state saved (unless it was), every save durable, then RESTORES restores
        over a scrambled state; the record's checkpoint figures."""
        if self.step % self.args.checkpoint_every:
            self._save()
        self.saver.close()
        if dist.is_initialized():
            dist.barrier()  # rank 0 wrote the sidecar
        found = checkpoint.latest(self.saver.folder)
        expected = checksum(self.model, self.optimizer)
        for _ in range(RESTORES):
            scramble(self.model, self.optimizer)
            self.saver.restore(found, self.model, self.optimizer)
        figures = checkpoint_cost.figures(self.events(), self.saver.restores, self.args.checkpoint)
        return {**figures, **checkpoint_cost.rates(self.timed),
                "restore_matches": checksum(self.model, self.optimizer) == expected,
                "checkpoint_stall_share": self.stalled_s / self.wall_s if self.wall_s else None,
                "restored_step": found.step, "checkpoint_pinned": self.saver.pinned}
