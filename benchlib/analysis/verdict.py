"""Which of two setups is faster, as the records say it, with its interval.

A comparison is a sentence computed from two groups of records of the same work:

- from `MIN_FOR_CI` or more independent runs (launches) on each side, the ratio of the
  medians with a seeded bootstrap 95% interval (both sides resampled);
- with fewer, the range of the ratio: the slowest value of one side over the fastest of
  the other and back (min/max of the runs' medians, or of one run's epochs), and n;
- a direction ("A x1.31 over B") only when that interval lies wholly above or below 1;
  "no clear difference" when it spans 1; nothing but the ratio when a side has one value.

It flips with the data: the faster side is named first, whichever it is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd

from benchlib.analysis.intervals import RESAMPLES, ratio_interval
from benchlib.core.timing import MIN_FOR_CI


@dataclass(frozen=True)
class Side:
    """One side's values: the runs' medians, or (one run) its own min-max and n."""

    name: str
    median: float
    low: float
    high: float
    n: int
    unit: str  # "runs" (independent launches) or "epochs" / "repeats" (inside one run)
    values: tuple[float, ...] = ()  # the runs' medians, for the bootstrap


def side(name: str, runs: pd.DataFrame, col: str = "samples_per_s",
         within: str = "epochs") -> Side:
    """A side from its records: several runs count as one value each; a single run gives
    its `<col>_min`/`_max`/`_n` (the values inside it, called `within`)."""
    values = tuple(float(v) for v in runs[col].dropna())
    if len(values) != 1:
        return Side(name, statistics.median(values) if values else math.nan,
                    min(values, default=math.nan), max(values, default=math.nan),
                    len(values), "runs", values)
    row = runs.dropna(subset=[col]).iloc[0]
    n = _get(row, f"{col}_n", 1)
    return Side(name, values[0], _get(row, f"{col}_min", values[0]),
                _get(row, f"{col}_max", values[0]), int(n), within, values)


def _get(row: pd.Series, key: str, default: float) -> float:
    value = row.get(key)
    return default if value is None or pd.isna(value) else float(value)


def interval(a: Side, b: Side, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, str]:
    """(low, high, what) of median(a) / median(b): a bootstrap 95% CI from enough runs on
    both sides, else the range low_a/high_b - high_a/low_b."""
    if a.unit == b.unit == "runs" and min(a.n, b.n) >= MIN_FOR_CI:
        # each run one launch of one value: the same bootstrap `benchlib compare` makes
        r = ratio_interval([[v] for v in b.values], [[v] for v in a.values], resamples, seed)
        return r.low, r.high, "95% CI"
    return a.low / b.high, a.high / b.low, "range"


def compare(a: Side, b: Side, higher_is_better: bool = True) -> str:
    """'**A x1.31 over B** (95% CI 1.20-1.40, n=5 and 5 runs)', the faster named first;
    'no clear difference between A and B (...)' when the interval spans 1."""
    if any(math.isnan(v) or v <= 0 for v in (a.median, b.median, a.low, b.low)):
        return f"{a.name} against {b.name}: no usable values"
    if not higher_is_better:  # times: the faster has the smaller value
        a, b = _inverted(a), _inverted(b)
    counts = f"n={a.n} {a.unit} and {b.n} {b.unit}" if a.unit != b.unit \
        else f"n={a.n} and {b.n} {a.unit}"
    if min(a.n, b.n) < 2:
        ratio = a.median / b.median
        return (f"{a.name}/{b.name} {ratio:.2f} from {counts}: too few values to say which "
                "is faster")
    low, high, what = interval(a, b)
    if low <= 1 <= high:
        return (f"no clear difference between {a.name} and {b.name} ({a.name}/{b.name} "
                f"{a.median / b.median:.2f}, {what} {low:.2f}-{high:.2f}, {counts})")
    if high < 1:
        return compare(b, a)
    few = "; too few runs for a 95% CI" if what == "range" else ""
    return f"**{a.name} x{a.median / b.median:.2f} over {b.name}** ({what} {low:.2f}-{high:.2f}, {counts}{few})"


def faster(a: Side, b: Side, higher_is_better: bool = True) -> str | None:
    """The name of the side that is clearly faster (interval wholly past 1), else None."""
    if not higher_is_better:
        a, b = _inverted(a), _inverted(b)
    if min(a.n, b.n) < 2 or a.low <= 0 or b.low <= 0:
        return None
    low, high, _ = interval(a, b)
    return a.name if low > 1 else b.name if high < 1 else None


def _inverted(s: Side) -> Side:
    """Times as rates (1/t): the faster side gets the larger value."""
    return Side(s.name, 1 / s.median, 1 / s.high, 1 / s.low, s.n, s.unit,
                tuple(1 / v for v in s.values))
