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
    collective. They are read without stalling the device: a step's events once the last
    of them has completed (`query`, at a later step's end), the rest after the epoch's
    own synchronize (`epoch_waits`); no step synchronizes for them (not yet checked on a
    GPU: docs/diagnose.md)."""

    def __init__(self, cuda: bool = False, last_bucket_delay_s: float = 0.0):
        self.cuda = cuda
        # a slower link made on purpose (tests, `--inject-comm-delay-ms`): the step's last
        # bucket waits this long inside its all-reduce, where backward has nothing left to
        # hide it behind
        self.last_bucket_delay_s = last_bucket_delay_s
        self.intervals: list[tuple[Any, Any]] = []
        self.pending: list[list[tuple[Any, Any]]] = []  # CUDA steps whose events are unread
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

    @staticmethod
    def _seconds(intervals: list[tuple[Any, Any]]) -> list[tuple[float, float]]:
        """A step's CUDA intervals in seconds from its first event (all of them completed)."""
        ref = intervals[0][0]
        return [(ref.elapsed_time(a) / 1e3, ref.elapsed_time(b) / 1e3) for a, b in intervals]

    def step_end(self) -> None:
        """Close one step's buckets (after the optimizer step: every future has completed);
        a step without any is a step of no communication, kept so that steps stay aligned
        with the loop's."""
        step, self.intervals = self.intervals, []
        if not self.cuda or not step:
            self.steps.append(_union(step))
            return
        self.pending.append(step)
        while self.pending and all(b.query() for _, b in self.pending[0]):
            self.steps.append(_union(self._seconds(self.pending.pop(0))))

    def epoch_waits(self, steps: int) -> list[float]:
        """The exposed all-reduce of each of the last `steps` steps (after the epoch's own
        synchronize, which leaves every CUDA event read)."""
        if self.pending:
            torch.cuda.synchronize()
            self.steps += [_union(self._seconds(s)) for s in self.pending]
            self.pending = []
        return [e for _, e in self.steps[-steps:]] if steps else []

    def figures(self, warmup_steps: int) -> dict[str, float | None]:
        """Median per step over the steps after the warm-up (each epoch's warm-up included
        in `steps` is what it is: a median is not moved by a few)."""
        self.epoch_waits(0)
        kept = self.steps[warmup_steps:] or self.steps
        if not kept:
            return {"comm_s": None, "comm_exposed_s": None, "comm_hidden_fraction": None}
        comm = statistics.median(c for c, _ in kept)
        exposed = statistics.median(e for _, e in kept)
        return {"comm_s": comm, "comm_exposed_s": exposed,
                "comm_hidden_fraction": max(0.0, 1 - exposed / comm) if comm > 0 else None}


def _union(spans: list[tuple[float, float]]) -> tuple[float, float]:
    """(comm_s, exposed_s) of one step's bucket intervals: the time some bucket was in
    flight, and the time from the last launch to the last end."""
    if not spans:
        return (0.0, 0.0)
    spans = sorted(spans)
    busy, (lo, hi) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > hi:
            busy, lo, hi = busy + hi - lo, a, b
        else:
            hi = max(hi, b)
    busy += hi - lo
    return (busy, max(b for _, b in spans) - max(a for a, _ in spans))


def attach(model: Any, last_bucket_delay_s: float = 0.0) -> CommTimer | None:
    """A CommTimer on a DistributedDataParallel model of more than one rank, else None."""
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel) or dist.get_world_size() < 2:
        return None
    timer = CommTimer(next(model.parameters()).is_cuda, last_bucket_delay_s)
    model.register_comm_hook(None, timer.hook)
    return timer


def unknown(strategy: str, world_size: int, timer: CommTimer | None) -> dict[str, str]:
    """`comm_unknown`, why a run of several ranks has no communication figures (diagnose
    then draws no communication verdict from it), or nothing."""
    if world_size < 2 or timer is not None or strategy not in ("ddp", "fsdp2"):
        return {}
    why = ("FSDP2's all-gathers and reduce-scatters are not timed" if strategy == "fsdp2"
           else "the all-reduce was not timed (--no-comm-timer)")
    return {"comm_unknown": why}

