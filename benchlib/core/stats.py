"""The statistics every figure and comparison uses, in one place (core.intervals holds
the intervals of other figures: a step's shares, a rank's skew, two spreads, a model's
errors over clusters): quantiles, a run's summary (median, p10/p90, min-max, n, and the
median's order-statistic interval from 6 or more independent values, with the coverage
it has; below that, too few for a 95% interval, and what min-max covers), the bootstrap of
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

MIN_FOR_CI = 5  # fewer independent values a side than this: a ratio gets no interval
# A direction needs an interval over independent launches on both sides, and an interval
# needs 5 or more of them: repeats inside one process share its luck (on this shared
# machine whole launches of one setup ran 2x apart; docs/compare.md), and a bootstrap over
# 2 to 4 launches names a direction from identical data far more often than 5% (issue 23).
MIN_LAUNCHES = MIN_FOR_CI
DEFAULT_THRESHOLD = 0.10  # a direction must clear this too (docs/compare.md)
RESAMPLES = 2000
# A bootstrap draws more, doubling up to this, while a verdict's boundary lies within
# MC_MARGIN Monte-Carlo standard errors of an interval bound; past it, "at the boundary"
MAX_RESAMPLES = 64_000
MC_MARGIN = 3.0
ALPHA = 0.05  # the family-wise error rate of the directions one comparison call names


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_order_interval(ordered: Sequence[float], level: float = 0.95
                          ) -> tuple[float, float, float]:
    """(low, high, coverage): the distribution-free interval of the median from the
    order statistics of `ordered` (sorted, independent, continuous values): the pair
    x(k), x(n+1-k) with the largest k whose coverage, P(Bin(n, 1/2) in [k, n-k]), is at
    least `level`; that coverage is exact for any continuous distribution. Below 6 values
    no pair reaches 95% (5 values: min-max covers 93.75%): NaN bounds, and the coverage
    min-max would have."""
    n = len(ordered)
    if n < 2:
        return math.nan, math.nan, math.nan
    below = [math.comb(n, j) / 2 ** n for j in range(n + 1)]  # P(B = j)
    coverage = lambda k: 1 - 2 * sum(below[:k])  # noqa: E731 - P(k <= B <= n - k)
    k = max((k for k in range(1, n // 2 + 1) if coverage(k) >= level), default=None)
    if k is None:
        return math.nan, math.nan, coverage(1)
    return float(ordered[k - 1]), float(ordered[n - k]), coverage(k)


MIN_FOR_MEDIAN_CI = 6  # the fewest independent values whose min-max covers the median 95%


def summarize(values: Sequence[float], name: str, independent: bool = True) -> dict[str, float]:
    """`name` (median), `name_p10`, `name_p90`, `name_min`, `name_max`, `name_n`, and
    `name_ci95_low`/`_high`: the median's order-statistic interval
    (`median_order_interval`) from MIN_FOR_MEDIAN_CI or more independent values, NaN
    otherwise, with `name_ci95_coverage`, the coverage it has (at least 95%; below 6
    values, what min-max covers: too few for a 95% interval). Values taken inside one
    process (its epochs, its repeats, its rounds: `independent=False`) share its luck, so
    any interval would be too narrow: they get none."""
    ordered = sorted(v for v in values if v is not None and math.isfinite(v))
    low, high, coverage = median_order_interval(ordered) if independent \
        else (math.nan, math.nan, math.nan)
    return {
        name: statistics.median(ordered) if ordered else math.nan,
        f"{name}_p10": quantile(ordered, 0.10),
        f"{name}_p90": quantile(ordered, 0.90),
        f"{name}_min": ordered[0] if ordered else math.nan,
        f"{name}_max": ordered[-1] if ordered else math.nan,
        f"{name}_ci95_low": low,
        f"{name}_ci95_high": high,
        f"{name}_ci95_coverage": coverage,
        f"{name}_n": len(ordered),
    }


def spread_text(stats: dict[str, float], name: str, fmt: str = ",.3f") -> str:
    """'95% CI a-b, n' where summarize made an interval (6 or more independent values),
    else 'range a-b, n', with what the range covers where its values were independent
    ('range a-b, n=5: too few for a 95% interval (min-max covers the median 93.8%)')."""
    n = stats[f"{name}_n"]
    if math.isfinite(stats.get(f"{name}_ci95_low", math.nan)):
        return (f"95% CI {stats[f'{name}_ci95_low']:{fmt}}-{stats[f'{name}_ci95_high']:{fmt}}, "
                f"n={n}")
    text = f"range {stats[f'{name}_min']:{fmt}}-{stats[f'{name}_max']:{fmt}}, n={n}"
    covers = stats.get(f"{name}_ci95_coverage", math.nan)
    if math.isfinite(covers):
        text += f": too few for a 95% interval (min-max covers the median {covers:.1%})"
    return text


@dataclass
class Boot:
    """A percentile bootstrap's 95% interval and how far a seed can move it: the larger
    Monte-Carlo standard error of its two bounds, the draws taken, and whether a verdict's
    boundary still lay within MC_MARGIN of them after MAX_RESAMPLES (`at_boundary`: no
    seed may decide which side it falls)."""

    low: float
    high: float
    mc_error: float
    resamples: int
    at_boundary: bool = False
    values: Any = field(default=None, repr=False)

    def text(self) -> str:
        return (f"Monte-Carlo error ±{self.mc_error:.2g} over {self.resamples:,} draws"
                + ("; at the boundary: no seed decides it" if self.at_boundary else ""))


def _mc_error(ordered, q: float) -> float:
    """The Monte-Carlo standard error of the q-quantile of `ordered` (sorted draws): half
    the distance between the order statistics a binomial standard deviation either side."""
    n = len(ordered)
    at, d = q * (n - 1), math.sqrt(n * q * (1 - q))
    return float(ordered[min(n - 1, math.ceil(at + d))] - ordered[max(0, math.floor(at - d))]) / 2


def percentile_bounds(draw, boundaries: Sequence[float], resamples: int = RESAMPLES,
                      seed: int = 0, most: int = MAX_RESAMPLES) -> Boot:
    """The 95% percentile interval of `draw(rng, n)`'s resampled statistics (n at a time,
    one seeded generator), drawing more (doubling, up to `most`) while any of the verdict's
    `boundaries` is within MC_MARGIN Monte-Carlo errors of a bound: judged by the share of
    draws at or below the boundary against 2.5% and 97.5% (the binomial error of that share
    holds where a bound's own error does not: a median of few values has few distinct
    values, and its bootstrap stands on a lattice)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = np.asarray(draw(rng, resamples), dtype=float)
    tail = 0.025
    while True:
        ordered = np.sort(values)
        low, high = (float(v) for v in np.percentile(ordered, [2.5, 97.5]))
        error = MC_MARGIN * math.sqrt(tail * (1 - tail) / len(values))
        shares = [np.searchsorted(ordered, b, side="right") / len(values) for b in boundaries]
        near = any(abs(share - t) < error for share in shares for t in (tail, 1 - tail))
        if not near or len(values) >= most:
            mc = max(_mc_error(ordered, tail), _mc_error(ordered, 1 - tail))
            return Boot(low, high, mc, len(values), near, values)
        values = np.concatenate([values, draw(rng, len(values))])


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
    mc: Boot | None = field(default=None, repr=False)  # its draws and Monte-Carlo error

    @property
    def at_boundary(self) -> bool:
        return self.mc is not None and self.mc.at_boundary


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
                   seed: int = 0, threshold: float = DEFAULT_THRESHOLD) -> Ratio:
    """new / base of the medians, with a seeded bootstrap 95% percentile interval when
    both sides have at least MIN_FOR_CI values, drawn until no boundary of the verdict at
    `threshold` (1 / (1 + t), 1 + t, either way round) lies within its Monte-Carlo error
    (`percentile_bounds`). `base`, `new`: values per record."""
    flat_b = [v for g in base for v in g]
    flat_n = [v for g in new for v in g]
    ratio = statistics.median(flat_n) / statistics.median(flat_b)
    low = high = boot = mc = None
    if min(len(flat_b), len(flat_n)) >= MIN_FOR_CI:
        def draw(rng, n):
            return boot_medians(new, rng, n) / boot_medians(base, rng, n)
        # the verdict's bounds; a slower-is-better figure's, 1 / ratio's, are the same two
        mc = percentile_bounds(draw, (1 / (1 + threshold), 1 + threshold), resamples, seed)
        low, high, boot = mc.low, mc.high, mc.values
    return Ratio(ratio, low, high, min(flat_n) / max(flat_b), max(flat_n) / min(flat_b),
                 len(flat_b), len(flat_n), boot, mc)


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
                      n_launches: int = MIN_LAUNCHES, holm_rejects: bool = True,
                      at_boundary: bool = False) -> str:
    """The direction a 95% speed interval supports, the one verdict rule (`benchlib
    compare` and notebook 90): slower / faster / no change / inconclusive for a 95% speed
    interval (new / base performance, > 1 faster)
    over independent launches. A direction only when the interval excludes 1 and clears
    the threshold and, among comparisons judged together, `holm` rejects this one
    (`holm_rejects`; a lone comparison is a family of one: True); None bounds (too few
    values), fewer than MIN_LAUNCHES launches on the side with fewest, or an interval whose
    bound a threshold still lies within the Monte-Carlo error of (`at_boundary`: which side
    it falls would be the seed's choice) are inconclusive ("no clear difference", with n)."""
    if speed_low is None or speed_high is None or n_launches < MIN_LAUNCHES or at_boundary:
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
