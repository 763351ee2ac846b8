"""One epoch's throughput across ranks, and a run's figures across epochs: the one place the
DDP/DataParallel and Lightning trainers turn step times into throughput.

Each rank times its own steady-state steps (warm-up left out) and shares a small summary
(`rank_share`); the epoch's throughput is every rank's samples over the slowest rank's
time in those steps, because a synchronous step ends when its slowest rank ends. The run
is then summarized over its epochs, each epoch one sample (`run_figures`).

Start-up is a figure beside the steady rate, never dropped: the time to the first batch,
the time the warm-up left out, and the whole-epoch rate (every sample over the epoch's
wall time). Each names its window: the steps and samples timed an epoch (`window_steps`,
`window_samples`) and those the epoch ran (`steps`, `epoch_samples`). A run that stopped at
`max_steps` short of its data set's epoch also gets what a whole epoch of the data set
would read (`full_epoch_samples_per_s`, projected: the epoch as run, then the steps it did
not run at the window's steady step), and its start-up is judged on that epoch, the
user's, not on the cut one (`startup_projected`; `window_startup_gap` keeps the cut one's).
Where the steady rate is more than STARTUP_GAP times the whole-epoch rate, it hides the
start-up, and the record says so in words (`startup_text`); the gap carries its spread
over the run's epochs (`startup_gap_low`, `_high`, `_n`). The warm-up reaches
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
             "first_batch_s", "warmup_s")
# whole-epoch rates kept with their spread over epochs (median, p10, p90, min, max, n)
WHOLE_RATES = ("epoch_samples_per_s", "full_epoch_samples_per_s")
# an epoch's window and its data set's epoch, in steps and samples (the median epoch's)
COUNTS = ("epoch_steps", "window_steps", "window_samples", "epoch_samples", "full_epoch_steps",
          "full_epoch_samples")
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
               backward_s: list[float] | None = None,
               full_steps: int | None = None, full_samples: int | None = None) -> dict[str, Any]:
    """What one rank contributes to its epoch's figures: its steady-state samples and time
    (the warm-up left out) and its per-step medians, its start-up (the first batch's wait,
    the time left out, the whole epoch) and its window's steps. `waits`: each step's
    all-reduce time nothing hid (DDP's comm hook); `prefetched`: the batches the
    DataLoader's workers fetch ahead at start-up (loops.PREFETCH_FACTOR x workers): the
    warm-up is extended past them where a step is left after them; `forward_s` and
    `backward_s`, where the step marked them, its compute split (their means over the
    window); `full_steps` and `full_samples`, where the rank reads a data set, its epoch
    of it (the loader's length and the samples it holds): what a run cut by `max_steps`
    projects a whole epoch from. Refuses a warm-up that leaves no timed step."""
    steps = len(samples)
    w = window_start(warmup_steps, prefetched, steps)
    if steps <= w:
        raise ConfigError("warmup_steps", f"{warmup_steps} leaves no timed step of the "
                                          f"{steps} this epoch had")
    data, compute = data_s[w:], compute_s[w:]
    step = [d + c for d, c in zip(data, compute)]
    split = {f"{name}_s": sum(v[w:]) / len(v[w:]) for name, v in
             (("forward", forward_s), ("backward", backward_s)) if v and len(v) == steps}
    full = {"full_steps": full_steps, "full_samples": full_samples} \
        if full_steps and full_samples else {}
    return {**split, **full, "samples": sum(samples[w:]), "step_s": sum(step),
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
    epoch_samples = sum(s.get("epoch_samples", s["samples"]) for s in shares)
    return {"samples_per_s": sum(s["samples"] for s in shares) / shares[slowest]["step_s"],
            "epoch_s": epoch_s,
            "epoch_samples_per_s": epoch_samples / epoch_s if epoch_s > 0 else math.nan,
            "epoch_steps": mine["steps"], "window_steps": mine.get("timed_steps"),
            "window_samples": sum(s["samples"] for s in shares), "epoch_samples": epoch_samples,
            **full_epoch(shares, epoch_s, shares[slowest]),
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


def full_epoch(shares: list[dict[str, Any]], epoch_s: float,
               slowest: dict[str, Any]) -> dict[str, Any]:
    """What a whole epoch of the data set would read where every rank stopped short of it
    (`max_steps`): its steps (a rank's) and samples (all ranks'), and its rate projected as
    the epoch as run (start-up and all) plus the steps not run at the window's steady step
    (the slowest rank's, data wait included); nothing where the epoch ran whole."""
    if not all(s.get("full_steps") for s in shares) or \
            all(s["full_steps"] <= s["steps"] for s in shares) or not slowest.get("timed_steps"):
        return {}
    extra = max(s["full_steps"] - s["steps"] for s in shares)
    seconds = epoch_s + extra * slowest["step_s"] / slowest["timed_steps"]
    samples = sum(s["full_samples"] for s in shares)
    return {"full_epoch_steps": max(s["full_steps"] for s in shares),
            "full_epoch_samples": samples, "full_epoch_samples_per_s": samples / seconds}


def whole_epoch(m: dict[str, Any]) -> tuple[float | None, bool]:
    """(the whole-epoch rate the user's epoch reads, projected): a record's full-epoch
    rate where it stopped short of the data set's epoch, else its epoch's as run (None
    where it has neither)."""
    for name, projected in (("full_epoch_samples_per_s", True), ("epoch_samples_per_s", False)):
        rate = m.get(name)
        if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
            return rate, projected
    return None, False


def _kept(values: list[float], name: str) -> dict[str, Any]:
    """A rate over epochs as a record keeps it: median, p10, p90, min, max and n."""
    s = summarize(values, name, independent=False)
    return {k: s[k] for k in (name, *(f"{name}_{e}" for e in ("p10", "p90", "min", "max", "n")))}


def window_figures(epochs: list[dict[str, Any]], samples_per_s: float) -> dict[str, Any]:
    """What a run's epochs say beside its steady rate: the medians of the per-epoch
    figures (the whole-epoch rates with their spread and n), the window each epoch timed,
    each share's median with the widest spread any epoch gave, whether a timed window held
    only prefetched batches, and the start-up gap over the user's epoch with its spread."""
    out: dict[str, Any] = {}
    for name in PER_EPOCH:
        if epochs and all(e.get(name) is not None for e in epochs):
            out[name] = summarize([e[name] for e in epochs], name)[name]
    for name in WHOLE_RATES:
        if epochs and all(e.get(name) is not None for e in epochs):
            out.update(_kept([e[name] for e in epochs], name))
    for name in COUNTS:
        if epochs and all(e.get(name) is not None for e in epochs):
            out[name] = statistics.median_low(e[name] for e in epochs)
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
    whole, projected = whole_epoch(out)
    gaps = [e["samples_per_s"] / whole_epoch(e)[0] for e in epochs
            if e.get("samples_per_s") and whole_epoch(e)[0]]
    out.update(startup_figures(samples_per_s, whole, gaps if len(gaps) == len(epochs) else [],
                               out.get("epoch_samples_per_s") if projected else None))
    if out.get("startup_hidden"):  # the record says it in words
        out["startup_note"] = startup_text({**out, "samples_per_s": samples_per_s})
    return out


def startup_figures(samples_per_s: float | None, whole: float | None,
                    gaps: list[float] = (), window: float | None = None) -> dict:
    """`startup_gap` (the steady rate over the whole-epoch rate `whole`) and
    `startup_hidden` (beyond STARTUP_GAP: the steady rate hides the start-up); with each
    epoch's gap, their spread (`startup_gap_low`, `_high`, `_n`); where `whole` is projected
    for the data set's epoch, `startup_projected` and the gap over the epoch as run
    (`window`'s rate) beside it."""
    if not samples_per_s or not whole or math.isnan(whole):
        return {}
    gap = samples_per_s / whole
    out = {"startup_gap": gap, "startup_hidden": gap > STARTUP_GAP}
    if len(gaps) > 1:
        out.update(startup_gap_low=min(gaps), startup_gap_high=max(gaps), startup_gap_n=len(gaps))
    if window:
        out.update(startup_projected=True, window_startup_gap=samples_per_s / window)
    return out


def window_text(m: dict[str, Any]) -> str:
    """The steady rate's window: '28 steps, 896 samples timed an epoch' ('' unknown)."""
    steps, samples = m.get("window_steps"), m.get("window_samples")
    if not steps:
        return ""
    return f"{steps:,} steps" + (f", {samples:,} samples" if samples else "") + " timed an epoch"


def whole_text(m: dict[str, Any]) -> str:
    """The whole-epoch rate's window: 'the whole epoch of 960 samples', or 'a whole epoch of
    50,000 samples, projected from the 30 steps run and 1,533 more at the steady step'."""
    if whole_epoch(m)[1]:
        ran, full = m.get("epoch_steps") or 0, m.get("full_epoch_steps") or 0
        return (f"a whole epoch of {m.get('full_epoch_samples', 0):,} samples, projected from "
                f"the {ran:,} steps run and {max(full - ran, 0):,} more at the steady step")
    samples = m.get("epoch_samples")
    return "the whole epoch" + (f" of {samples:,} samples" if samples else "")


def gap_text(m: dict[str, Any]) -> str:
    """'10.3x', with its spread over epochs where kept ('10.3x, 9.8-11.0 over 3 epochs'),
    and the cut epoch's gap where the whole one is projected ('; the 30 steps run: 4.3x')."""
    text = f"{m['startup_gap']:.1f}x"
    if m.get("startup_gap_n"):
        text += (f", {m['startup_gap_low']:.1f}-{m['startup_gap_high']:.1f} over "
                 f"{m['startup_gap_n']} epochs")
    if m.get("startup_projected") and m.get("window_startup_gap"):
        text += f"; the {m.get('epoch_steps') or 0:,} steps run: {m['window_startup_gap']:.1f}x"
    return text


def startup_text(m: dict[str, Any]) -> str:
    """'start-up hidden by the steady rate: 1,549 samples/s steady (28 steps, 896 samples
    timed an epoch), 150 over the whole epoch of 960 samples (10.3x); the first batch came
    after 119 s' for a record whose steady rate hides the start-up of the user's epoch
    (projected where the run stopped short of it), else ''."""
    if not m.get("startup_hidden"):
        return ""
    first, window = m.get("first_batch_s"), window_text(m)
    return (f"start-up hidden by the steady rate: {m['samples_per_s']:,.0f} samples/s steady"
            + (f" ({window})" if window else "")
            + f", {whole_epoch(m)[0]:,.0f} over {whole_text(m)} ({gap_text(m)})"
            + (f"; the first batch came after {first:.3g} s" if first is not None else "")
            + (f", the warm-up left out {m['warmup_s']:.3g} s" if m.get("warmup_s") else ""))


def run_figures(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's metrics over its epochs: samples/s with its spread, and the median of each
    per-epoch time; `timing` names the method (timing.WINDOW)."""
    steady = summarize([e["samples_per_s"] for e in epochs], "samples_per_s", independent=False)
    return {**steady, "timing": WINDOW, **window_figures(epochs, steady["samples_per_s"]),
            "loss_last": epochs[-1]["loss_last"]}
