"""Which of two setups is faster, as the records say it, with its interval.

A comparison is a sentence computed from two groups of records of the same work, by the
one verdict rule `benchlib compare` uses too (benchlib.core.stats.direction_verdict):

- a side's values are its independent launches: each launch's figure where a record keeps
  them (`details.launches`, every process one value), else one value per record;
- from `MIN_LAUNCHES` (5) or more launches on each side, the ratio of the medians with a
  seeded bootstrap 95% interval (both sides resampled);
- a direction ("A x1.31 over B") only when that interval excludes 1 and clears the
  threshold (`DEFAULT_THRESHOLD`); otherwise "no clear difference", with n. With fewer
  launches the sentence gives the range of the ratio (the launches', or one launch's
  epochs or repeats) and n, and no direction: epochs inside one process share its luck, and
  with identical data one launch a side named a winner about a third of the time.

It flips with the data: the faster side is named first, whichever it is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd

from benchlib.core.stats import (
    DEFAULT_THRESHOLD,
    MIN_LAUNCHES,
    RESAMPLES,
    direction_verdict,
    ratio_interval,
)


@dataclass(frozen=True)
class Side:
    """One side's launches: their values, median and min-max; with one launch, the min-max
    and n of the values inside it (`unit`: epochs or repeats)."""

    name: str
    median: float
    low: float
    high: float
    n: int  # launches
    unit: str  # what low-high span: "launches", or "epochs" / "repeats" inside one launch
    values: tuple[float, ...] = ()  # each launch's value, for the bootstrap (where kept)
    inside: int = 0  # with one launch: how many values inside it


def side(name: str, runs: pd.DataFrame, col: str = "samples_per_s",
         within: str = "epochs") -> Side:
    """A side from its records: each launch one value (a record's `<col>_launches` where it
    keeps them, else the record's own figure); a single launch gives its
    `<col>_min`/`_max`/`_n` (the values inside it, called `within`)."""
    rows = runs.dropna(subset=[col]) if col in runs else runs.iloc[:0]
    values: list[float] = []
    for _, row in rows.iterrows():
        kept = row.get(f"{col}_launches")
        values.extend(kept if isinstance(kept, (tuple, list)) and len(kept) else [row[col]])
    values = [float(v) for v in values]
    if len(values) != 1:
        return Side(name, statistics.median(values) if values else math.nan,
                    min(values, default=math.nan), max(values, default=math.nan),
                    len(values), "launches", tuple(values))
    row = rows.iloc[0]
    low, high = _get(row, f"{col}_min", values[0]), _get(row, f"{col}_max", values[0])
    n = int(_get(row, f"{col}_n", 1))
    if within == "launches" and n > 1:  # a record of launches that does not keep their values
        return Side(name, values[0], low, high, n, "launches")
    return Side(name, values[0], low, high, 1, within, tuple(values), n)


def _get(row: pd.Series, key: str, default: float) -> float:
    value = row.get(key)
    return default if value is None or pd.isna(value) else float(value)


def interval(a: Side, b: Side, resamples: int = RESAMPLES, seed: int = 0,
             threshold: float = DEFAULT_THRESHOLD) -> tuple[float, float, str]:
    """(low, high, what) of median(a) / median(b): a bootstrap 95% CI from MIN_LAUNCHES or
    more launches on both sides ("95% CI at the boundary" where a threshold stayed within
    its Monte-Carlo error), else the range low_a/high_b - high_a/low_b."""
    if min(len(a.values), len(b.values)) >= MIN_LAUNCHES:
        # each launch one value: the bootstrap `benchlib compare` makes
        r = ratio_interval([[v] for v in b.values], [[v] for v in a.values], resamples, seed,
                           threshold)
        return r.low, r.high, "95% CI at the boundary" if r.at_boundary else "95% CI"
    return a.low / b.high, a.high / b.low, "range"


def call(a: Side, b: Side, threshold: float = DEFAULT_THRESHOLD) -> str:
    """The verdict on speed a / b (core.stats.direction_verdict): faster, slower, no change
    or inconclusive."""
    low, high, what = interval(a, b, threshold=threshold)
    if not what.startswith("95% CI"):
        return "inconclusive"
    return direction_verdict(low, high, threshold, min(len(a.values), len(b.values)),
                             at_boundary=what.endswith("boundary"))


def _counts(a: Side, b: Side) -> str:
    def one(s: Side) -> str:
        return (f"1 launch ({s.inside} {s.unit})" if s.n == 1 and s.unit != "launches"
                and s.inside > 1 else f"{s.n} launch{'es' if s.n != 1 else ''}")
    return f"n={one(a)} each" if one(a) == one(b) else f"n={one(a)} and {one(b)}"


def compare(a: Side, b: Side, higher_is_better: bool = True,
            threshold: float = DEFAULT_THRESHOLD) -> str:
    """'**A x1.31 over B** (95% CI 1.20-1.40, n=5 launches each)', the faster named first,
    when the 95% interval over launches excludes 1 and clears the threshold; else
    'no clear difference between A and B (...)', with n."""
    if any(math.isnan(v) or v <= 0 for v in (a.median, b.median, a.low, b.low)):
        return f"{a.name} against {b.name}: no usable values"
    if not higher_is_better:  # times: the faster has the smaller value
        a, b = _inverted(a), _inverted(b)
    verdict_ = call(a, b, threshold)
    if verdict_ == "slower":
        a, b = b, a
        verdict_ = "faster"
    low, high, what = interval(a, b, threshold=threshold)
    ratio = a.median / b.median
    if verdict_ == "faster":
        return (f"**{a.name} x{ratio:.2f} over {b.name}** ({what} {low:.2f}-{high:.2f}, "
                f"{_counts(a, b)}, beyond the {threshold:.0%} threshold)")
    if what == "95% CI at the boundary":
        why = (f"a bound stays within its Monte-Carlo error of the {threshold:.0%} threshold "
               "after every draw: no seed may decide it")
    elif what == "95% CI":
        why = ("within" if verdict_ == "no change" else "not clear of") + \
            f" the {threshold:.0%} threshold"
    elif min(a.n, b.n) >= MIN_LAUNCHES:
        why = "the records keep no value per launch to give a 95% interval from"
    else:
        why = f"a direction needs a 95% interval from {MIN_LAUNCHES}+ launches a side"
    return (f"no clear difference between {a.name} and {b.name} ({a.name}/{b.name} "
            f"{ratio:.2f}, {what} {low:.2f}-{high:.2f}, {_counts(a, b)}; {why})")


def judged(a: Side, b: Side, threshold: float = DEFAULT_THRESHOLD) -> str:
    """A measured change as `diagnose` and its `--try` say it: `compare`'s sentence from
    MIN_LAUNCHES or more launches a side; with fewer, the ratio with its range and n, and
    that no direction is named (never "no clear difference" beside a ratio of 22.9)."""
    if min(a.n, b.n) >= MIN_LAUNCHES:
        return compare(a, b, threshold=threshold).replace("**", "")
    if any(math.isnan(v) or v <= 0 for v in (a.median, b.median, a.low, b.low)):
        return f"{a.name} against {b.name}: no usable values"
    low, high, what = interval(a, b, threshold=threshold)
    return (f"{a.name} x{a.median / b.median:.2f} of {b.name} ({what} {low:.2f}-{high:.2f}, "
            f"{_counts(a, b)}): no direction from fewer than {MIN_LAUNCHES} launches a side")


def faster(a: Side, b: Side, higher_is_better: bool = True,
           threshold: float = DEFAULT_THRESHOLD) -> str | None:
    """The name of the side that is clearly faster by the verdict rule, else None."""
    if not higher_is_better:
        a, b = _inverted(a), _inverted(b)
    if a.low <= 0 or b.low <= 0 or math.isnan(a.median) or math.isnan(b.median):
        return None
    verdict_ = call(a, b, threshold)
    return a.name if verdict_ == "faster" else b.name if verdict_ == "slower" else None


def _inverted(s: Side) -> Side:
    """Times as rates (1/t): the faster side gets the larger value."""
    return Side(s.name, 1 / s.median, 1 / s.high, 1 / s.low, s.n, s.unit,
                tuple(1 / v for v in s.values), s.inside)
