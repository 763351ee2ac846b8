"""One epoch's throughput across ranks, and a run's figures across epochs: the one place the
DDP/DataParallel and Lightning trainers turn step times into throughput.

Each rank times its own steady-state steps (warm-up left out) and shares a small summary
(`rank_share`); the epoch's throughput is every rank's samples over the slowest rank's
time in those steps, because a synchronous step ends when its slowest rank ends. The run
is then summarized over its epochs, each epoch one sample (`run_figures`)."""

from __future__ import annotations

from typing import Any

from benchlib.core.stats import summarize
from benchlib.core.timing import WINDOW
from benchlib.errors import ConfigError

# figures kept per epoch and summarized (median) over the run, besides samples_per_s
PER_EPOCH = ("epoch_s", "batch_s", "data_s", "compute_s")


def rank_share(samples: list[int], data_s: list[float], compute_s: list[float],
               epoch_s: float, loss_last: float, warmup_steps: int) -> dict[str, float]:
    """What one rank contributes to its epoch's figures: its steady-state samples and time
    (the first `warmup_steps` steps left out) and its per-step medians. Refuses a warm-up
    that leaves no timed step."""
    if len(samples) <= warmup_steps:
        raise ConfigError("warmup_steps", f"{warmup_steps} leaves no timed step of the "
                                          f"{len(samples)} this epoch had")
    w = warmup_steps
    data, compute = data_s[w:], compute_s[w:]
    return {"samples": sum(samples[w:]), "step_s": sum(data) + sum(compute),
            "timed_steps": len(data), "epoch_s": epoch_s, "loss_last": loss_last,
            "steps": len(samples),
            "batch_s": sorted(d + c for d, c in zip(data, compute))[len(data) // 2],
            "data_s": sum(data) / len(data), "compute_s": sum(compute) / len(compute)}


def across_ranks(shares: list[dict[str, float]], reporter: int = 0) -> dict[str, Any]:
    """One epoch from every rank's share: samples/s = all samples over the slowest rank's
    step time; the epoch lasts as long as its longest rank; per-step times are the
    `reporter` rank's own (the rank that writes the result); the loss is the ranks' mean."""
    slowest = max(range(len(shares)), key=lambda r: shares[r]["step_s"])
    mine = shares[reporter]
    return {"samples_per_s": sum(s["samples"] for s in shares) / shares[slowest]["step_s"],
            "epoch_s": max(s["epoch_s"] for s in shares),
            "batch_s": mine["batch_s"], "data_s": mine["data_s"], "compute_s": mine["compute_s"],
            "steps": mine["steps"], "slowest_rank": slowest,
            # each rank's mean step (data + compute): a straggler shows here
            "rank_step_s": [s["step_s"] / max(s.get("timed_steps", 1), 1) for s in shares],
            "loss_last": sum(s["loss_last"] for s in shares) / len(shares)}


def run_figures(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's metrics over its epochs: samples/s with its spread, and the median of each
    per-epoch time; `timing` names the method (timing.WINDOW)."""
    return {**summarize([e["samples_per_s"] for e in epochs], "samples_per_s",
                                 independent=False), "timing": WINDOW,
            **{name: summarize([e[name] for e in epochs], name)[name] for name in PER_EPOCH},
            "loss_last": epochs[-1]["loss_last"]}
