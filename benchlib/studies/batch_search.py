"""The search for the largest batch that fits, over trials that each run in a fresh
process (benchlib.studies.memory_and_batch hands it one): pure, so that it is tested on
a model of memory with the noise measured here.

A peak moves between processes (on this CPU some 25 MiB of RSS at the same batch), so a
batch that fit once may not fit again, and one trial at the edge is a guess. The search:

1. climbs from `start`, each next batch chosen from the peaks measured so far: with one
   batch measured, its peak above the process's baseline taken as all per sample (an
   upper bound on the growth: the model's fixed bytes counted as if they grew); with two
   or more, the growth between the largest that fit and the largest at most half of it
   (two batches next to each other would give the noise, not the growth). Each step goes
   three quarters of the way to where that growth puts the limit, so that no trial is
   expected to pass the limit by more than the error of the measured growth (a doubling
   step could pass it by 2x). Without a peak to go by, it doubles.
2. narrows between the largest batch that fit and the smallest that did not, aiming at
   the limit by the same growth (bisection every other step, so that a wrong growth
   cannot stall it), until they are next to each other;
3. confirms: the largest batch that fit is run until `confirm` fresh processes have, and
   all must fit, else it is no longer the largest that fits and the search narrows below
   it; the first batch that did not fit likewise, all failing. A batch between that fits
   in some processes and not in others is unreliable: the answer is the largest batch that
   always fit and the first that never did, and the ones between are named.

The answer states the margin to the limit (the highest peak at the largest batch), the
spread of the peaks at both ends, and what the confirmation supports: a batch that fit in
all of k fresh processes fails in at most 1 - 0.05^(1/k) of them at 95% (3 of 3: 63%; 10
of 10: 26%), one that failed in all of k fits in at most as many. It says so where the
margin is below the widest spread of peaks seen at one batch (a rerun may then not fit).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# a climbing step goes this share of the way to where the growth puts the limit: a growth
# measured over small batches is off by the noise over their span (on this CPU's 25 MiB,
# a fifth of it between batches 1 and 13), and all the way would pass the limit by that
# error times the distance; three quarters land under it and close in within a few steps
CLIMB = 0.75
Trial = dict[str, Any]  # a batch_trial's row: batch_size, fits, peak_bytes, baseline_bytes, ...


@dataclass
class Search:
    """The trials so far, by batch, in the order run."""

    run: Callable[[int], Trial]
    limit: int | None
    order: list[Trial] = field(default_factory=list)

    def __call__(self, batch: int) -> bool:
        row = self.run(batch)
        self.order.append(row)
        if self.limit is None:  # CUDA's own memory, once a trial has said how much
            self.limit = row.get("memory_limit_bytes") or row.get("device_total_bytes")
        return bool(row["fits"])

    def at(self, batch: int) -> list[Trial]:
        return [t for t in self.order if t["batch_size"] == batch]

    def always(self, batch: int, fits: bool) -> bool:
        rows = self.at(batch)
        return bool(rows) and all(bool(t["fits"]) == fits for t in rows)

    def confirm(self, batch: int, fits: bool, n: int) -> bool:
        """Run `batch` until n processes have: True when every one went the way `fits`
        says (stops at the first that does not)."""
        while self.always(batch, fits) and len(self.at(batch)) < n:
            self(batch)
        return self.always(batch, fits)

    def growth(self, below: int) -> tuple[int, float, float] | None:
        """(batch, its peak, bytes per sample) to aim from: the largest batch up to `below`
        that always fit, and the growth between it and the largest at most half of it
        (one measured: its peak above the baseline, per sample: an upper bound). None
        without peaks."""
        fit = sorted(b for b in {t["batch_size"] for t in self.order}
                     if b <= below and self.always(b, True))
        peaks = {b: statistics.median(t["peak_bytes"] for t in self.at(b)) for b in fit
                 if all(t.get("peak_bytes") is not None for t in self.at(b))}
        if not peaks:
            return None
        top = max(peaks)
        if len(peaks) >= 2:  # over a span of at least 2x, so that the noise does not rule it
            prev = max((b for b in peaks if 2 * b <= top), default=min(peaks))
            slope = (peaks[top] - peaks[prev]) / (top - prev)
        else:
            base = self.at(top)[0].get("baseline_bytes") or 0
            slope = (peaks[top] - base) / top
        return (top, peaks[top], slope) if slope > 0 else None

    def aim(self, low: int, high: int, reach: float = 1.0) -> int | None:
        """The batch in (low, high) whose peak the growth puts at the limit (`reach`: that
        share of the way there); None when there is no limit or no growth to go by."""
        g = self.growth(low) if self.limit else None
        if g is None:
            return None
        batch, peak, slope = g
        return max(low + 1, min(high - 1, batch + int(reach * (self.limit - peak) // slope)))


def search(run: Callable[[int], Trial], start: int, cap: int, limit: int | None,
           confirm: int = 3) -> tuple[int | None, int | None, Search]:
    """(the largest batch that always fit, the first that never did, the trials): None for
    the first when `start` does not fit, for the second when `cap` fits."""
    s = Search(run, limit)
    low, high = None, None
    batch = start
    while s(batch):  # 1. climb
        low = batch
        if batch == cap:
            break
        batch = s.aim(low, cap + 1, CLIMB) or min(2 * low, cap)
    else:
        high = batch
    bisect = False
    while True:
        while low is not None and high is not None and high - low > 1:  # 2. narrow
            aimed = None if bisect else s.aim(low, high)
            mid = aimed or (low + high) // 2
            bisect = aimed is not None and not bisect
            if s(mid) and s.always(mid, True):
                low = mid
            else:
                high = mid
        if low is None:  # not even the start fits: the first misfit, unless it fits again
            if s.confirm(start, False, confirm):
                return None, start, s
            return None, first_misfit(s, start, cap, confirm), s
        if not s.confirm(low, True, confirm):  # 3. the largest that fit, again
            high = low
            below = [b for b in {t["batch_size"] for t in s.order} if b < high
                     and s.always(b, True)]
            low = max(below) if below else None
            if low is None:  # nothing tried fits every time: the first that never does
                return None, first_misfit(s, high, cap, confirm), s
            continue
        if high is None:
            return low, None, s
        if s.confirm(high, False, confirm):
            return low, high, s
        # `high` fits in some processes: unreliable; the first that never fits is above
        first = first_misfit(s, high, cap, confirm)
        return low, first, s


def first_misfit(s: Search, unreliable: int, cap: int, confirm: int) -> int | None:
    """The smallest batch above `unreliable` that failed in every one of `confirm`
    processes: bisection between the largest batch seen to fit at least once and the
    smallest above it seen to fail (one batch up at a time to find one: the edge is
    near); None when `cap` fits at least once."""
    def fit_once(b: int) -> bool:
        return any(t["fits"] for t in s.at(b))

    low = unreliable
    while True:
        failed = sorted(b for b in {t["batch_size"] for t in s.order} if b > low
                        and not fit_once(b))
        high = failed[0] if failed else None
        if high is None:  # the next batch up: past the edge, not a doubling past it
            if low >= cap:
                return None
            if s(low + 1):
                low += 1
            continue
        if high - low > 1:
            mid = (low + high) // 2
            s(mid)
            if fit_once(mid):  # fits in some process (now or before): the edge is above
                low = mid
            continue
        if s.confirm(high, False, confirm):
            return high
        low = high


def rate_bound(processes: int, level: float = 0.95) -> float | None:
    """The most a rate can be when `processes` fresh processes all went the other way: the
    one-sided `level` bound 1 - (1 - level)^(1/n) (Clopper-Pearson at 0 events)."""
    return 1 - (1 - level) ** (1 / processes) if processes else None


def peak_spread(s: Search) -> int | None:
    """The widest spread (max - min) of the peaks of the processes that fit at one batch,
    over every batch two or more fit at: how far a peak moves between processes here."""
    spreads = [max(p) - min(p) for b in {t["batch_size"] for t in s.order}
               if len(p := [t["peak_bytes"] for t in s.at(b)
                            if t["fits"] and t.get("peak_bytes") is not None]) >= 2]
    return max(spreads) if spreads else None


def summary(s: Search, largest: int | None, first: int | None) -> dict[str, Any]:
    """The answer's figures: processes and peaks at both ends (min, max), the margin of
    the largest batch's highest peak to the limit, the unreliable batches between, what
    the confirmations support (`rate_bound`), and the widest spread of peaks at one batch
    against the margin."""
    def peaks(b: int | None) -> list[int]:
        return [t["peak_bytes"] for t in s.at(b) if t.get("peak_bytes") is not None] \
            if b is not None else []
    top, bottom = peaks(largest), peaks(first)
    rates = [t["samples_per_s"] for t in s.at(largest) if t.get("samples_per_s")] \
        if largest is not None else []
    between = sorted(b for b in {t["batch_size"] for t in s.order}
                     if (largest is None or b > largest) and (first is None or b < first))
    return {
        "largest_batch": largest, "smallest_batch_not_fitting": first,
        "largest_batch_processes": len(s.at(largest)) if largest is not None else 0,
        "misfit_processes": len(s.at(first)) if first is not None else 0,
        "largest_batch_samples_per_s": statistics.median(rates) if rates else None,
        "largest_batch_peak_bytes": max(top) if top else None,
        "largest_batch_peak_min_bytes": min(top) if top else None,
        "misfit_peak_min_bytes": min(bottom) if bottom else None,
        "misfit_peak_max_bytes": max(bottom) if bottom else None,
        "limit_bytes": s.limit,
        "margin_bytes": s.limit - max(top) if top and s.limit else None,
        "unreliable_batches": ", ".join(f"{b} (fit {sum(t['fits'] for t in s.at(b))} of "
                                        f"{len(s.at(b))})" for b in between),
        "batches_tried": len({t["batch_size"] for t in s.order}), "trials": len(s.order),
        "largest_batch_fails_at_most": rate_bound(len(top)) if largest is not None else None,
        "misfit_fits_at_most": rate_bound(len(s.at(first))) if first is not None else None,
        "peak_spread_bytes": peak_spread(s),
        "growth_bytes_per_sample": (g[2] if largest is not None and (g := s.growth(largest))
                                    else None),
    }
