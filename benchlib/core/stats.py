"""The statistics every figure and comparison uses, in one place (core.intervals holds
the intervals of other figures: a step's shares, a rank's skew, two spreads, a model's
errors over clusters): quantiles, a run's summary (median, p10/p90, min-max, n, and a
bootstrap interval only from MIN_FOR_CI or more independent values), the bootstrap of
medians (launches resampled first, then values within each launch) and its interval, the
ratio of two groups' medians with its 95% interval, a model's median absolute error,
Holm's step-down over several comparisons, and the one rule for a direction
(`direction_verdict`): a direction only from a 95% interval over MIN_LAUNCHES or more
independent launches a side (values taken in separate processes) that excludes 1 and
clears the threshold; otherwise no direction, with n. A lone comparison is a family of
one, where Holm's rule is its 95% interval clearing the bound. `benchlib compare`
(benchlib.compare.changes), notebook 90's sentences (benchlib.analysis.sides) and the GPU
check's A/B all judge by it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_FOR_CI = 5  # fewer independent values than this: the range, not a bootstrap interval
# A direction needs an interval over independent launches on both sides, and an interval
# needs 5 or more of them: repeats inside one process share its luck (on this shared
# machine whole launches of one setup ran 2x apart; docs/compare.md), and a bootstrap over
# 2 to 4 launches names a direction from identical data far more often than 5% (issue 23).
MIN_LAUNCHES = MIN_FOR_CI
DEFAULT_THRESHOLD = 0.10  # a direction must clear this too (docs/compare.md)
RESAMPLES = 2000
ALPHA = 0.05  # the family-wise error rate of the directions one comparison call names


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_ci95(values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
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


@dataclass
class Ratio:
    ratio: float  # new median / base median
    low: float | None  # 95% bootstrap interval of the ratio; None with too few values
    high: float | None
    range_low: float  # the smallest and largest ratio of any two values
    range_high: float
    n_base: int
    n_new: int
    boot: Any = field(default=None, repr=False)  # the resampled ratios behind low-high


def boot_medians(groups: list[list[float]], rng, resamples: int):
    """Bootstrap medians: values resampled within one launch; with several launches
    (records), launches first, then values within each."""
    import numpy as np

    if len(groups) == 1:
        a = np.asarray(groups[0])
        return np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    lens = np.array([len(g) for g in groups])
    padded = np.full((len(groups), lens.max()), np.nan)
    for i, g in enumerate(groups):
        padded[i, :len(g)] = g
    picked = rng.integers(0, len(groups), (resamples, len(groups)))  # launches, resampled
    size = lens[picked][..., None]  # then each picked launch's values, as many as it has
    slot = np.arange(lens.max())
    within = (rng.random((resamples, len(groups), lens.max())) * size).astype(int)
    drawn = padded[picked[..., None], within]
    if (lens == lens.max()).all():  # no padding drawn: the plain median, several times faster
        return np.median(drawn.reshape(resamples, -1), axis=1)
    drawn = np.where(slot < size, drawn, np.nan)
    return np.nanmedian(drawn.reshape(resamples, -1), axis=1)


def ratio_interval(base: list[list[float]], new: list[list[float]], resamples: int = RESAMPLES,
                   seed: int = 0) -> Ratio:
    """new / base of the medians, with a seeded bootstrap 95% percentile interval when
    both sides have at least MIN_FOR_CI values. `base`, `new`: values per record."""
    import numpy as np

    flat_b = [v for g in base for v in g]
    flat_n = [v for g in new for v in g]
    ratio = statistics.median(flat_n) / statistics.median(flat_b)
    low = high = boot = None
    if min(len(flat_b), len(flat_n)) >= MIN_FOR_CI:
        rng = np.random.default_rng(seed)
        boot = boot_medians(new, rng, resamples) / boot_medians(base, rng, resamples)
        low, high = (float(q) for q in np.percentile(boot, [2.5, 97.5]))
    return Ratio(ratio, low, high, min(flat_n) / max(flat_b), max(flat_n) / min(flat_b),
                 len(flat_b), len(flat_n), boot)


def median_interval(groups: list[list[float]], resamples: int = RESAMPLES,
                    seed: int = 0) -> tuple[float, float]:
    """A seeded bootstrap 95% percentile interval of the median of values grouped by launch
    (`boot_medians`: launches first, then values within each), as `ratio_interval`
    resamples each side."""
    import numpy as np

    boot = boot_medians(groups, np.random.default_rng(seed), resamples)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(low), float(high)


def median_abs_error(errors: Sequence[float]) -> float:
    """The median of the errors' absolute values (a model's % off published figures);
    a missing error is left out, none at all is NaN."""
    import numpy as np

    values = np.abs(np.asarray(errors, dtype=float))
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else math.nan


def direction_p(speed_boot, threshold: float) -> float:
    """The two-sided bootstrap p-value of a direction beyond the threshold: twice the share
    of resampled speeds (new / base performance) on the wrong side of the bound, for the
    direction with fewer (1 / (1 + threshold) for slower, 1 + threshold for faster). It is
    the percentile interval read the other way: with R a multiple of 40 resamples, a 95%
    interval that clears the bound has p <= 0.05, so a family of one keeps every direction
    the interval gives. It moves in steps of 2 / R; `resamples_for` keeps those below
    Holm's strictest level."""
    import numpy as np

    speed = np.asarray(speed_boot)
    share = min(np.mean(speed >= 1 / (1 + threshold)), np.mean(speed <= 1 + threshold))
    return float(min(1.0, 2 * share))


def resamples_for(tests: int, resamples: int = RESAMPLES) -> int:
    """Resamples for `tests` comparisons judged together: a multiple of `resamples` large
    enough that p's step, 2 / R, is no coarser than Holm's strictest level, ALPHA / tests
    (2000 up to 50 tests): else p = 0 would be the only p that can pass it."""
    return resamples * max(1, math.ceil(2 * tests / ALPHA / resamples))


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm-Bonferroni step-down: which of m hypotheses are rejected with the chance of
    any false rejection at most `alpha`, whatever their dependence. The smallest p is
    held to alpha / m, the next to alpha / (m - 1), ..., stopping at the first that fails;
    with m = 1 it is p <= alpha."""
    rejected = [False] * len(pvalues)
    for rank, i in enumerate(sorted(range(len(pvalues)), key=pvalues.__getitem__)):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        rejected[i] = True
    return rejected


def direction_verdict(speed_low: float | None, speed_high: float | None, threshold: float,
                      n_launches: int = MIN_LAUNCHES, holm_rejects: bool = True) -> str:
    """The direction a 95% speed interval supports, the one verdict rule (`benchlib
    compare` and notebook 90): slower / faster / no change / inconclusive for a 95% speed
    interval (new / base performance, > 1 faster)
    over independent launches. A direction only when the interval excludes 1 and clears
    the threshold and, among comparisons judged together, `holm` rejects this one
    (`holm_rejects`; a lone comparison is a family of one: True); None bounds (too few
    values), or fewer than MIN_LAUNCHES launches on the side with fewest, are
    inconclusive ("no clear difference", with n)."""
    if speed_low is None or speed_high is None or n_launches < MIN_LAUNCHES:
        return "inconclusive"
    if speed_high < 1 / (1 + threshold):
        return "slower" if holm_rejects else "inconclusive"
    if speed_low > 1 + threshold:
        return "faster" if holm_rejects else "inconclusive"
    if speed_low >= 1 / (1 + threshold) and speed_high <= 1 + threshold:
        return "no change"
    return "inconclusive"


def needed_for_sameness(n: int, low: float, high: float, margin: float,
                        ratio: float) -> int | None:
    """About how many values a side would make a 95% interval of this `ratio` lie inside
    `margin` (1/margin to margin), so that the two sides could be called the same: the
    interval's half-width in log space shrinks as 1/sqrt(n). None where no n would: the
    ratio itself is outside the margin, or the interval has no upper bound."""
    if not (0 < low <= high) or math.isinf(high) or ratio <= 0:
        return None
    room = math.log(margin) - abs(math.log(ratio))  # the half-width the interval may have
    if room <= 0:
        return None
    half = (math.log(high) - math.log(low)) / 2
    return max(n, math.ceil(n * (half / room) ** 2))


# A target (the GPU check's 40% MFU, 2,800 images/s) is judged on this many launches or
# more, each a fresh process with its own window: too few for an interval (MIN_LAUNCHES),
# so the rule below asks every launch to agree instead (docs/gpus.md, "Targets").
MIN_TARGET_LAUNCHES = 3


def against_target(values: Sequence[float], target: float) -> str:
    """A figure against a target it must reach, over independent launches: `pass` when
    every one of MIN_TARGET_LAUNCHES or more launches reaches the target, `fail` when none
    does, `launches disagree` in between, `too few launches` below MIN_TARGET_LAUNCHES.
    With 3 launches and a true median exactly at the target, all three land on one side
    with probability 1/8 each: a pass or a fail is wrong at most 12.5% of the time there,
    and less the further the truth is from the target."""
    found = [v for v in values if v is not None and math.isfinite(v)]
    if len(found) < MIN_TARGET_LAUNCHES:
        return "too few launches"
    reached = sum(v >= target for v in found)
    return "pass" if reached == len(found) else "fail" if reached == 0 else "launches disagree"


# The steady rate (timed steps) over the whole-epoch rate (every step, start-up included)
# beyond which the steady rate hides the start-up (DESIGN rule 11): a record, a sentence and
# a verdict built on the steady rate then say so, and no speedup is taken from it.
STARTUP_GAP = 2.0
