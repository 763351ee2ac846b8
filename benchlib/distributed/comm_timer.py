"""DDP's gradient all-reduce, timed bucket by bucket through a communication hook
(`DistributedDataParallel.register_comm_hook`): what one step spends communicating, and
how much of it backward hides.

Each bucket's all-reduce is launched the moment backward has its gradients and ends when
its future completes. Per step: `comm_s`, the time some bucket was in flight (the union of
their intervals), and `exposed_s`, the time from the last bucket's launch (backward has
then no more gradients to compute) to the last bucket's end: the communication nothing
hides. hidden = 1 - exposed / comm. The hook does what DDP's default does (sum, then
divide by the world size), so the gradients are the same."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist


class CommTimer:
    """On a CPU (gloo) each bucket's start and end are host clock readings: its future
    completes when the all-reduce has. On CUDA (NCCL) the future completes when the
    collective is queued, so the hook records CUDA events instead: one on the compute
    stream at the launch, one in the future's callback, whose stream waits for the
    collective; their times, read at the step's end, are the GPU's own (not yet checked
    on a GPU: docs/diagnose.md)."""

    def __init__(self, cuda: bool = False, last_bucket_delay_s: float = 0.0):
        self.cuda = cuda
        # a slower link made on purpose (tests, `--inject-comm-delay-ms`): the step's last
        # bucket waits this long inside its all-reduce, where backward has nothing left to
        # hide it behind
        self.last_bucket_delay_s = last_bucket_delay_s
        self.intervals: list[tuple[Any, Any]] = []
        self.steps: list[tuple[float, float]] = []  # (comm_s, exposed_s) per step

    def _mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def hook(self, state, bucket):  # unannotated: DDP checks a hook's annotations as objects
        tensor = bucket.buffer()
        world = dist.get_world_size()
        start = self._mark()
        if self.last_bucket_delay_s and bucket.is_last():
            time.sleep(self.last_bucket_delay_s)

        def done(fut: torch.futures.Future) -> torch.Tensor:
            self.intervals.append((start, self._mark()))
            return fut.value()[0].div_(world)

        return dist.all_reduce(tensor, async_op=True).get_future().then(done)

    def _seconds(self) -> list[tuple[float, float]]:
        """The step's intervals in seconds on one clock (CUDA: from the first event)."""
        if not self.cuda:
            return self.intervals
        torch.cuda.synchronize()
        ref = self.intervals[0][0]
        return [(ref.elapsed_time(a) / 1e3, ref.elapsed_time(b) / 1e3)  # ms from one event
                for a, b in self.intervals]

    def step_end(self) -> None:
        """Close one step's buckets (after the optimizer step: every future has completed)."""
        if not self.intervals:
            return
        spans = sorted(self._seconds())
        busy, (lo, hi) = 0.0, spans[0]
        for a, b in spans[1:]:
            if a > hi:
                busy, lo, hi = busy + hi - lo, a, b
            else:
                hi = max(hi, b)
        busy += hi - lo
        exposed = max(b for _, b in spans) - max(a for a, _ in spans)
        self.steps.append((busy, exposed))
        self.intervals = []

    def figures(self, warmup_steps: int) -> dict[str, float | None]:
        """Median per step over the steps after the warm-up (each epoch's warm-up included
        in `steps` is what it is: a median is not moved by a few)."""
        kept = self.steps[warmup_steps:] or self.steps
        if not kept:
            return {"comm_s": None, "comm_exposed_s": None, "comm_hidden_fraction": None}
        comm = statistics.median(c for c, _ in kept)
        exposed = statistics.median(e for _, e in kept)
        return {"comm_s": comm, "comm_exposed_s": exposed,
                "comm_hidden_fraction": max(0.0, 1 - exposed / comm) if comm > 0 else None}


def attach(model: Any, last_bucket_delay_s: float = 0.0) -> CommTimer | None:
    """A CommTimer on a DistributedDataParallel model of more than one rank, else None."""
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel) or dist.get_world_size() < 2:
        return None
    timer = CommTimer(next(model.parameters()).is_cuda, last_bucket_delay_s)
    model.register_comm_hook(None, timer.hook)
    return timer
