"""Clocks that can be trusted, and statistics that are never a bare mean.

On CUDA the device runs behind the host: a clock read without a synchronize measures
how fast kernels were queued, not run. `StepClock` synchronizes before every read.
Warm-up steps are excluded by the caller (their count is a recorded parameter).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any


class StepClock:
    """perf_counter, synchronized with the device first when it is a CUDA device."""

    def __init__(self, device: Any = None):
        self.now = time.perf_counter  # no device to wait for: the bare clock, no extra call
        if device is not None and getattr(device, "type", str(device)).startswith("cuda"):
            import torch

            def synced() -> float:
                torch.cuda.synchronize(device)
                return time.perf_counter()

            self.now = synced


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_ci95(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap (percentile) interval of the median; seeded, so it is reproducible.
    With very few values it is wide, as it should be."""
    if len(values) < 2:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    return quantile(medians, 0.025), quantile(medians, 0.975)


def summarize(values: Sequence[float], name: str) -> dict[str, float]:
    """`name` (median), `name_p10`, `name_p90`, `name_ci95_low`, `name_ci95_high`, `name_n`."""
    ordered = sorted(v for v in values if v is not None and math.isfinite(v))
    low, high = median_ci95(ordered)
    return {
        name: statistics.median(ordered) if ordered else math.nan,
        f"{name}_p10": quantile(ordered, 0.10),
        f"{name}_p90": quantile(ordered, 0.90),
        f"{name}_ci95_low": low,
        f"{name}_ci95_high": high,
        f"{name}_n": len(ordered),
    }
