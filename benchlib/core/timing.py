"""Clocks that can be trusted, and statistics that are never a bare mean.

On CUDA the device runs behind the host: a host clock read without a synchronize
measures how fast kernels were queued, not run. Two tools, for two jobs:

- `StepMarks` times every step of a loop on the device's own timeline (CUDA events,
  read after one synchronize at the end), so measuring does not stall the pipeline
  between host and device. On CPU it is the host clock.
- `StepClock` reads the host clock after a synchronize: for whole blocks of work.

Warm-up steps are excluded by the caller (their count is a recorded parameter).
"""

from __future__ import annotations

import math
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


class StepMarks:
    """Points in a sequence of steps: `mark()` now, `seconds(a, b)` between two marks
    once `wait()` has returned. CUDA marks are events recorded on the current stream:
    the device stamps them when it gets there, and nothing waits until `wait()`."""

    def __init__(self, device: Any = None):
        self.device = device
        self.cuda = device is not None and getattr(device, "type", str(device)).startswith("cuda")
        if self.cuda:
            import torch

            self._event = lambda: torch.cuda.Event(enable_timing=True)
            self._sync = lambda: torch.cuda.synchronize(device)

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = self._event()
        event.record()
        return event

    def wait(self) -> None:
        """Let the device finish what was queued, so that every mark can be read."""
        if self.cuda:
            self._sync()

    def seconds(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) / 1e3 if self.cuda else b - a


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
    import numpy as np  # one array op for all resamples: a per-resample loop took ~1 s a record

    data = np.asarray(values, dtype=float)
    rng, n = np.random.default_rng(seed), len(data)
    rows = max(1, 2_000_000 // n)  # resamples per block: at most ~16 MB of indices at once
    medians = np.concatenate([
        np.median(data[rng.integers(0, n, size=(min(rows, resamples - done), n))], axis=1)
        for done in range(0, resamples, rows)])
    low, high = np.quantile(medians, [0.025, 0.975])  # linear, as quantile() below
    return float(low), float(high)


# How a record's samples/s was timed (its `timing` metric), so that figures taken two
# ways are not compared unawares:
# - WINDOW: the timed steps' samples over their time, nothing synchronized inside the
#   window and one synchronize at its end (PyTorch: StepMarks, CUDA events on a GPU and
#   the host clock on CPU; JAX: the host clock and one block_until_ready). Every PyTorch
#   trainer but the elastic one, and JAX beside them (notebook 40).
# - PER_STEP: the median over steps of each step's samples over its host-clock time, every
#   step ended by a synchronize (the elastic trainer: its loss all-reduce, which it needs
#   each step to agree on stopping); the per-step sync is in every step's time.
WINDOW = "window"
PER_STEP = "per_step"

MIN_FOR_CI = 5  # fewer independent values than this: the range, not a bootstrap interval


def summarize(values: Sequence[float], name: str, independent: bool = True) -> dict[str, float]:
    """`name` (median), `name_p10`, `name_p90`, `name_min`, `name_max`, `name_n`, and
    `name_ci95_low`/`_high`: a bootstrap interval of the median from `MIN_FOR_CI` or more
    independent values, NaN otherwise. Below that a bootstrap gives back about the range,
    and calling it a 95% interval would overstate it: read min-max and n instead. Values
    taken inside one process (its epochs, its repeats, its rounds: `independent=False`)
    share its luck, so their bootstrap would be too narrow: they get no interval either."""
    ordered = sorted(v for v in values if v is not None and math.isfinite(v))
    enough = independent and len(ordered) >= MIN_FOR_CI
    low, high = median_ci95(ordered) if enough else (math.nan, math.nan)
    return {
        name: statistics.median(ordered) if ordered else math.nan,
        f"{name}_p10": quantile(ordered, 0.10),
        f"{name}_p90": quantile(ordered, 0.90),
        f"{name}_min": ordered[0] if ordered else math.nan,
        f"{name}_max": ordered[-1] if ordered else math.nan,
        f"{name}_ci95_low": low,
        f"{name}_ci95_high": high,
        f"{name}_n": len(ordered),
    }


def spread_text(stats: dict[str, float], name: str, fmt: str = ",.3f") -> str:
    """'95% CI a-b, n' where summarize made an interval (5 or more independent values),
    else 'range a-b, n'."""
    n = stats[f"{name}_n"]
    if n >= MIN_FOR_CI and math.isfinite(stats[f"{name}_ci95_low"]):
        return (f"95% CI {stats[f'{name}_ci95_low']:{fmt}}-{stats[f'{name}_ci95_high']:{fmt}}, "
                f"n={n}")
    return f"range {stats[f'{name}_min']:{fmt}}-{stats[f'{name}_max']:{fmt}}, n={n}"
