"""A known delay injected into training steps, so that a clock can be checked against a
truth (`benchlib calibrate --ground-truth`) and a straggler made on purpose
(`inject_step_delay_ms`, `delay_rank`): its length, by step, epoch and rank in a known
pattern (`inject_delay_pattern`), and the step's wait for it (a host sleep on CPU, a spin
kernel on CUDA). Never part of a real run."""

from __future__ import annotations

import statistics
import time

import torch

from benchlib.config.choices import DELAY_PATTERNS
from benchlib.errors import ConfigError


def cuda_cycles_per_ms(device: torch.device, cycles: int = 10_000_000) -> float:
    """How many cycles `torch.cuda._sleep` spins per millisecond on `device`, timed by CUDA
    events: the slope between spins of `cycles` and 3 x `cycles`, so that what a launch
    costs falls out; the median of 5, after one spin that lets the clocks ramp up."""
    with torch.cuda.device(device):
        torch.cuda._sleep(cycles)
        slopes = []
        for _ in range(5):
            a, b, c = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            torch.cuda._sleep(3 * cycles)
            c.record()
            c.synchronize()
            slopes.append(2 * cycles / (b.elapsed_time(c) - a.elapsed_time(b)))
    return statistics.median(slopes)


# How an injected delay varies by step, epoch and rank (`inject_delay_pattern`): each a
# case a figure could get wrong. uniform: every step the same. slow_warmup: the warm-up
# steps of each epoch 5x (a warm-up that leaked into the window would show). heavy_tail:
# every fifth step of an epoch 6x (the window's rate is its samples over all its time,
# the median step sits below it). slow_epoch: the second epoch 4x (the run's figure is the
# median over epochs, not their mean). slow_rank: one rank 2x (a synchronous step lasts
# as long as its slowest rank; the skew names that rank).
SLOW_WARMUP, HEAVY_TAIL, TAIL_EVERY, SLOW_EPOCH, SLOW_RANK = 5.0, 6.0, 5, 4.0, 2.0


def delay_factor(pattern: str, step: int, epoch: int, warmup_steps: int, slow: bool) -> float:
    """The multiple of the injected delay that step `step` (of its epoch, from 0) of epoch
    `epoch` (from 0) gets under `pattern`; `slow`: the step is the slow rank's."""
    if pattern == "slow_warmup":
        return SLOW_WARMUP if step < warmup_steps else 1.0
    if pattern == "heavy_tail":
        return HEAVY_TAIL if step % TAIL_EVERY == TAIL_EVERY - 1 else 1.0
    if pattern == "slow_epoch":
        return SLOW_EPOCH if epoch == 1 else 1.0
    if pattern == "slow_rank":
        return SLOW_RANK if slow else 1.0
    if pattern == "uniform":
        return 1.0
    raise ConfigError("inject_delay_pattern", f"{pattern!r} is not one of "
                      f"{', '.join(DELAY_PATTERNS)}")


def slow_rank(delay_rank: int, world_size: int) -> int:
    """The rank slow_rank slows: `delay_rank`, or the last rank where it is -1."""
    return delay_rank if delay_rank >= 0 else world_size - 1


class StepDelay:
    """A known time added inside every step, so that a clock can be checked against a
    truth (`benchlib calibrate --ground-truth`): `ms` times the pattern's factor for the
    step (`delay_factor`). On CPU the host sleeps; on CUDA a spin kernel of that length
    runs on the step's stream, where the CUDA events that time the step see it as they see
    compute (a host sleep would hide behind queued kernels). `run_epoch` tells it where an
    epoch starts; a loop of its own says where each step is (`at`)."""

    def __init__(self, ms: float, device: torch.device, pattern: str = "uniform",
                 warmup_steps: int = 0, slow: bool = False):
        if ms < 0:
            raise ConfigError("inject_step_delay_ms", f"must be >= 0, got {ms}")
        delay_factor(pattern, 0, 0, 0, False)  # an unknown pattern refused here
        self.ms, self.pattern, self.warmup_steps, self.slow = ms, pattern, warmup_steps, slow
        self.cycles_per_ms = cuda_cycles_per_ms(device) if ms and device.type == "cuda" else 0.0
        self.epoch, self.step = -1, 0

    @classmethod
    def of_rank(cls, ms: float, device: torch.device, pattern: str, warmup_steps: int,
                delay_rank: int, rank: int, world_size: int) -> StepDelay:
        """A rank's delay: under slow_rank every rank's, 2x on the slow one; otherwise
        `delay_rank`'s alone (-1: every rank's)."""
        if pattern == "slow_rank":
            return cls(ms, device, pattern, warmup_steps, rank == slow_rank(delay_rank, world_size))
        return cls(ms if delay_rank in (-1, rank) else 0.0, device, pattern, warmup_steps)

    def start_epoch(self) -> None:
        self.epoch, self.step = self.epoch + 1, 0

    def at(self, epoch: int, step: int) -> None:
        """Where the next step is, for a loop that keeps its own place (the elastic
        trainer, which resumes mid-epoch)."""
        self.epoch, self.step = epoch, step

    def __call__(self) -> None:
        ms = self.ms * delay_factor(self.pattern, self.step, max(self.epoch, 0),
                                    self.warmup_steps, self.slow)
        self.step += 1
        if self.cycles_per_ms and ms:
            torch.cuda._sleep(round(ms * self.cycles_per_ms))
        elif ms:
            time.sleep(ms / 1e3)
