"""Stopping together: SIGTERM (Slurm before it kills, torchrun when it stops its
workers) sets a flag, DataLoader workers leave the signal to their main process, and at
every step boundary one all_reduce gives the rank-averaged loss and whether any rank was
asked to stop, so that all ranks checkpoint at the same step and exit 75."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import torch
import torch.distributed as dist

from benchlib.distributed.env import DistEnv


class PreemptionFlag:
    """SIGTERM (what Slurm sends before it kills, and torchrun when it stops its
    workers) asks for a checkpoint at the next step boundary. The handler only sets a
    flag: printing from it could interrupt a print of the main thread. A second
    SIGTERM is not waited for: it kills at once."""

    def __init__(self) -> None:
        self.requested_at: float | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested_at is not None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        self.requested_at = time.time()


def ignore_sigterm(worker_id: int) -> None:
    """DataLoader workers leave SIGTERM to the main process, which stops them itself
    after its checkpoint (Slurm signals every process of the job step)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def agree(loss: torch.Tensor, stop: bool, env: DistEnv) -> tuple[float, bool]:
    """The rank-averaged loss, and whether any rank was asked to stop: one all_reduce."""
    if env.world_size == 1:
        return loss.item(), stop
    packed = torch.tensor([loss.item(), float(stop)], dtype=torch.float64, device=loss.device)
    dist.all_reduce(packed)
    total, flags = packed.tolist()
    return total / env.world_size, flags > 0


