"""What a run's checkpoints cost, from each save as the trainer saw it
(benchlib.trainers.saver: blocking and total seconds, the bytes each rank wrote, the bytes
it staged) and each restore: medians with their spread over the run's saves (values taken
inside one launch: p10-p90 and n, no interval), and the training rate with checkpoints
against the rate without, as a ratio with its interval over the run's checkpoint
intervals (inside one launch too: an estimate, not a verdict; a verdict compares launches
with and without checkpoints, `benchlib compare`)."""

from __future__ import annotations

import statistics
from typing import Any

from benchlib.core.stats import ratio_interval, summarize

ASYNC_MODES = ("dcp_async", "dcp_async_pinned")


def spread(values: list[float], name: str) -> dict[str, float]:
    """`name` (the median), `name_p10`, `name_p90` and `name_n`."""
    s = summarize(values, name, independent=False)
    return {k: s[k] for k in (name, f"{name}_p10", f"{name}_p90", f"{name}_n")}


def figures(saves: list[dict[str, Any]], restores: list[float], mode: str) -> dict[str, Any]:
    """The record's checkpoint figures from the completed saves' events and the restores'
    seconds: the bytes of a checkpoint, of the rank that wrote most and of the one that wrote
    least; MB/s per rank, the busiest rank's bytes over the time until durable; the staging
    rate (asynchronous modes), a rank's state over the time training waited for it."""
    done = [s for s in saves if s.get("total_s") is not None]
    out: dict[str, Any] = {"checkpoint_mode": mode, "checkpoints_written": len(done)}
    if restores:
        out.update(spread(restores, "restore_s"))
    if not done:
        return out
    blocking = [s["blocking_s"] for s in done]
    out.update(spread(blocking, "checkpoint_blocking_s"))
    out.update(spread([s["total_s"] for s in done], "checkpoint_total_s"))
    out.update(checkpoint_s=out["checkpoint_blocking_s"],  # the name older records have
               checkpoint_stall_s=sum(blocking))
    counted = [s for s in done if s.get("rank_bytes")]  # rank 0 counts every rank's files
    if counted:
        out.update(spread([max(s["rank_bytes"]) / 1e6 / s["total_s"] for s in counted],
                          "checkpoint_mb_per_s"))
        # a record's metrics are numbers: each save's bytes by rank stay in its event
        out.update({f"checkpoint_bytes{name}": statistics.median(pick(s["rank_bytes"])
                                                                 for s in counted)
                    for name, pick in (("", sum), ("_rank_max", max), ("_rank_min", min))})
    if mode in ASYNC_MODES:
        out.update(spread([s["staged_bytes"] / 1e9 / s["blocking_s"] for s in done],
                          "checkpoint_staging_gbps"))
    return out


def rates(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The training rate with checkpoints and without, from the timed steps in order, each
    {"samples", "step_s", "saved": a save followed it, "stall_s": what checkpointing
    stalled training after it (0: nothing), "writing": an asynchronous save was in flight
    during it}.

    Without: each step no checkpoint touched (no save after it, none in flight), its
    samples over its time. With: each checkpoint interval (the steps up to one that saved),
    its samples over its steps' time and the save's stall. The ratio is of their medians,
    with ratio_interval's bootstrap over them."""
    clean = [s["samples"] / s["step_s"] for s in steps
             if not s.get("saved") and not s.get("writing") and s["step_s"] > 0]
    intervals, samples, seconds = [], 0, 0.0
    for s in steps:
        samples, seconds = samples + s["samples"], seconds + s["step_s"] + (s.get("stall_s") or 0)
        if s.get("saved"):
            intervals.append(samples / seconds)
            samples, seconds = 0, 0.0
    stalled = sum(s["step_s"] + (s.get("stall_s") or 0) for s in steps)
    out: dict[str, Any] = {"samples_per_s_with_checkpoints":
                           sum(s["samples"] for s in steps) / stalled if stalled else None}
    if not clean or not intervals:
        return out
    r = ratio_interval([clean], [intervals])
    out.update(checkpoint_rate_ratio=r.ratio, checkpoint_rate_ratio_low=r.low,
               checkpoint_rate_ratio_high=r.high, checkpoint_rate_ratio_n=len(intervals))
    return out
