"""One epoch's throughput across ranks, and a run's figures across epochs: the one place the
DDP/DataParallel and Lightning trainers turn step times into throughput.

Each rank times its own steady-state steps (warm-up left out) and shares a small summary
(`rank_share`); the epoch's throughput is every rank's samples over the slowest rank's
time in those steps, because a synchronous step ends when its slowest rank ends. The run
is then summarized over its epochs, each epoch one sample (`run_figures`).

Start-up is a figure beside the steady rate, never dropped: the time to the first batch,
the time the warm-up left out, and the whole-epoch rate (every sample over the epoch's
wall time). Where the steady rate is more than STARTUP_GAP times the whole-epoch rate, it
hides the start-up, and the record says so in words (`startup_text`). The warm-up reaches
past the batches the DataLoader's workers prefetched at start-up where the epoch has a
step after them; where it has not, every timed step was such a batch and the record says
so (`window_prefetched_only`): no input verdict is drawn from that window.

Each share of a step (waiting for data, the all-reduce nothing hid, the rank's own
compute) and the slowest rank's skew carry their spread: a 95% bootstrap interval over the
window's steps on each rank, widened to the lowest and highest rank, then to every epoch
(benchlib.core.intervals.share_interval, skew_interval)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from benchlib.core.intervals import share_interval, skew_interval
from benchlib.core.stats import STARTUP_GAP, summarize
from benchlib.core.timing import WINDOW
from benchlib.errors import ConfigError

# figures kept per epoch and summarized (median) over the run, besides samples_per_s
PER_EPOCH = ("epoch_s", "batch_s", "data_s", "compute_s", "forward_s", "backward_s",
             "first_batch_s", "warmup_s", "epoch_samples_per_s")
# shares of a step with their spread (`<name>`, `<name>_low`, `<name>_high`)
SHARES = ("data_share", "comm_share", "compute_share", "rank_skew")
MAX_BLOCKS = 500  # a long window is resampled in this many blocks of consecutive steps


def window_start(warmup_steps: int, prefetched: int, steps: int) -> int:
    """The first timed step of an epoch of `steps`: past the warm-up and, where a step is
    left after them, past the batches the workers prefetched at start-up. samples/s, the
    energy meter and the utilisation sampler all open their window here."""
    return prefetched if warmup_steps < prefetched < steps else warmup_steps


def rank_share(samples: list[int], data_s: list[float], compute_s: list[float],
               epoch_s: float, loss_last: float, warmup_steps: int,
               waits: list[float] | None = None, prefetched: int = 0,
               forward_s: list[float] | None = None,
               backward_s: list[float] | None = None) -> dict[str, Any]:
    """What one rank contributes to its epoch's figures: its steady-state samples and time
    (the warm-up left out) and its per-step medians, its start-up (the first batch's wait,
    the time left out, the whole epoch) and its window's steps. `waits`: each step's
    all-reduce time nothing hid (DDP's comm hook); `prefetched`: the batches the
    DataLoader's workers fetch ahead at start-up (loops.PREFETCH_FACTOR x workers): the
    warm-up is extended past them where a step is left after them; `forward_s` and
    `backward_s`, where the step marked them, its compute split (their means over the
    window). Refuses a warm-up that leaves no timed step."""
    steps = len(samples)
    w = window_start(warmup_steps, prefetched, steps)
    if steps <= w:
        raise ConfigError("warmup_steps", f"{warmup_steps} leaves no timed step of the "
                                          f"{steps} this epoch had")
    data, compute = data_s[w:], compute_s[w:]
    step = [d + c for d, c in zip(data, compute)]
    split = {f"{name}_s": sum(v[w:]) / len(v[w:]) for name, v in
             (("forward", forward_s), ("backward", backward_s)) if v and len(v) == steps}
    return {**split,"samples": sum(samples[w:]), "step_s": sum(step),
            "timed_steps": len(data), "epoch_s": epoch_s, "loss_last": loss_last,
            "steps": steps, "warmup_excluded": w,
            "batch_s": sorted(step)[len(step) // 2],
            "data_s": sum(data) / len(data), "compute_s": sum(compute) / len(compute),
            "first_batch_s": data_s[0], "warmup_s": sum(data_s[:w]) + sum(compute_s[:w]),
            "epoch_samples": sum(samples),
            "prefetched_only": 0 < steps <= prefetched,
            "window": {"data": data, "step": step,
                       "wait": list(waits[w:]) if waits is not None else None}}


def _blocks(values: list[float], n: int) -> list[float]:
    """`values` summed in `n` runs of consecutive steps (all of them where fewer)."""
    if len(values) <= n:
        return list(values)
    size = len(values) / n
    return [sum(values[round(i * size):round((i + 1) * size)]) for i in range(n)]


def _spread(found: list[tuple[float, float, float]], name: str) -> dict[str, float]:
    """A share's figures from each rank's (share, low, high): the median over the ranks,
    the lowest low and the highest high."""
    found = [f for f in found if not math.isnan(f[0])]
    if not found:
        return {}
    return {name: statistics.median(f[0] for f in found), f"{name}_low": min(f[1] for f in found),
            f"{name}_high": max(f[2] for f in found)}


def window_shares(shares: list[dict[str, Any]]) -> dict[str, Any]:
    """The epoch's shares of a step with their spread over steps and ranks, and the skew of
    the slowest rank's own work (its step less the all-reduce it waited) over the others'."""
    windows = [s["window"] for s in shares]
    blocks = min(MAX_BLOCKS, min(len(w["step"]) for w in windows))
    step = [_blocks(w["step"], blocks) for w in windows]
    data = [_blocks(w["data"], blocks) for w in windows]
    timed = all(w["wait"] is not None for w in windows)
    wait = [_blocks(w["wait"], blocks) if timed else [0.0] * len(s)
            for w, s in zip(windows, step)]
    compute = [[max(s - d - c, 0.0) for s, d, c in zip(*r)] for r in zip(step, data, wait)]
    out = {**_spread([share_interval(d, s) for d, s in zip(data, step)], "data_share"),
           **_spread([share_interval(c, s) for c, s in zip(compute, step)], "compute_share")}
    if timed:
        out.update(_spread([share_interval(c, s) for c, s in zip(wait, step)], "comm_share"))
    if len(windows) > 1:
        own = [[s - c for s, c in zip(*r)] for r in zip(step, wait)]
        slowest, skew, low, high = skew_interval(own)
        out.update(rank_skew=skew, rank_skew_low=low, rank_skew_high=high,
                   skew_rank=slowest,
                   rank_own_s=[sum(w["step"]) / len(w["step"]) - (
                       sum(w["wait"]) / len(w["wait"]) if timed else 0.0) for w in windows])
    return out


def across_ranks(shares: list[dict[str, Any]], reporter: int = 0) -> dict[str, Any]:
    """One epoch from every rank's share: samples/s = all samples over the slowest rank's
    step time; the epoch lasts as long as its longest rank, and its first batch came when
    the last rank's did; per-step times are the `reporter` rank's own (the rank that
    writes the result); the loss is the ranks' mean."""
    slowest = max(range(len(shares)), key=lambda r: shares[r]["step_s"])
    mine = shares[reporter]
    epoch_s = max(s["epoch_s"] for s in shares)
    return {"samples_per_s": sum(s["samples"] for s in shares) / shares[slowest]["step_s"],
            "epoch_s": epoch_s,
            "epoch_samples_per_s": sum(s.get("epoch_samples", s["samples"]) for s in shares)
            / epoch_s if epoch_s > 0 else math.nan,
            "first_batch_s": max(s.get("first_batch_s", 0.0) for s in shares),
            "warmup_s": max(s.get("warmup_s", 0.0) for s in shares),
            "warmup_excluded": mine.get("warmup_excluded"),
            "prefetched_only": any(s.get("prefetched_only") for s in shares),
            "batch_s": mine["batch_s"], "data_s": mine["data_s"], "compute_s": mine["compute_s"],
            **{k: mine[k] for k in ("forward_s", "backward_s") if k in mine},
            "steps": mine["steps"], "slowest_rank": slowest,
            # each rank's mean step (data + compute): a straggler shows here
            "rank_step_s": [s["step_s"] / max(s.get("timed_steps", 1), 1) for s in shares],
            "loss_last": sum(s["loss_last"] for s in shares) / len(shares),
            **(window_shares(shares) if all("window" in s for s in shares) else {})}


def window_figures(epochs: list[dict[str, Any]], samples_per_s: float) -> dict[str, Any]:
    """What a run's epochs say beside its steady rate: the medians of the per-epoch
    figures, each share's median with the widest spread any epoch gave, whether a timed
    window held only prefetched batches, and the start-up gap."""
    out: dict[str, Any] = {}
    for name in PER_EPOCH:
        if epochs and all(e.get(name) is not None for e in epochs):
            out[name] = summarize([e[name] for e in epochs], name)[name]
    for name in SHARES:
        have = [e for e in epochs if e.get(name) is not None]
        if have:
            out.update({name: statistics.median(e[name] for e in have),
                        f"{name}_low": min(e[f"{name}_low"] for e in have),
                        f"{name}_high": max(e[f"{name}_high"] for e in have)})
    if epochs and any("prefetched_only" in e for e in epochs):
        out["window_prefetched_only"] = any(e.get("prefetched_only") for e in epochs)
    if any(e.get("rank_own_s") for e in epochs):  # each rank's own list stays in the epochs
        out["skew_rank"] = statistics.median_low(e["skew_rank"] for e in epochs if "skew_rank" in e)
    out.update(startup_figures(samples_per_s, out.get("epoch_samples_per_s")))
    if out.get("startup_hidden"):  # the record says it in words
        out["startup_note"] = startup_text({**out, "samples_per_s": samples_per_s})
    return out


def startup_figures(samples_per_s: float | None, epoch_samples_per_s: float | None) -> dict:
    """`startup_gap` (the steady rate over the whole-epoch rate) and `startup_hidden`
    (beyond STARTUP_GAP: the steady rate hides the start-up)."""
    if not samples_per_s or not epoch_samples_per_s or math.isnan(epoch_samples_per_s):
        return {}
    gap = samples_per_s / epoch_samples_per_s
    return {"startup_gap": gap, "startup_hidden": gap > STARTUP_GAP}


def startup_text(m: dict[str, Any]) -> str:
    """'start-up hidden by the steady rate: 1,549 samples/s steady, 150 over the whole
    epoch (10.3x); the first batch came after 119 s' for a record whose steady rate hides
    its start-up, else ''."""
    if not m.get("startup_hidden"):
        return ""
    first = m.get("first_batch_s")
    return (f"start-up hidden by the steady rate: {m['samples_per_s']:,.0f} samples/s steady, "
            f"{m['epoch_samples_per_s']:,.0f} over the whole epoch ({m['startup_gap']:.1f}x)"
            + (f"; the first batch came after {first:.3g} s" if first is not None else "")
            + (f", the warm-up left out {m['warmup_s']:.3g} s" if m.get("warmup_s") else ""))


def run_figures(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's metrics over its epochs: samples/s with its spread, and the median of each
    per-epoch time; `timing` names the method (timing.WINDOW)."""
    steady = summarize([e["samples_per_s"] for e in epochs], "samples_per_s", independent=False)
    return {**steady, "timing": WINDOW, **window_figures(epochs, steady["samples_per_s"]),
            "loss_last": epochs[-1]["loss_last"]}
