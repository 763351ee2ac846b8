"""Bootstrap intervals of figures other than a median or a ratio of medians (those, and
the rule that judges them, are core.stats): a share of a step and the slowest rank's skew
(the steps resampled), the ratio of two relative spreads (each side's values resampled),
and a model's median absolute error with its paired difference from a baseline's (whole
clusters of cells resampled). Every one is seeded, so the same values give the same
interval anywhere."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchlib.core.stats import MIN_FOR_CI, RESAMPLES, Boot, percentile_bounds


def _resampled_steps(n: int, resamples: int, seed: int):
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def share_interval(parts: Sequence[float], wholes: Sequence[float], resamples: int = RESAMPLES,
                   seed: int = 0) -> tuple[float, float, float]:
    """(share, low, high): sum(parts) / sum(wholes) over the steps of a window (the data
    wait over the step time, say), with a seeded bootstrap 95% interval, the steps
    resampled; from fewer than MIN_FOR_CI steps, the range of the steps' own shares."""
    import numpy as np

    part, whole = np.asarray(parts, dtype=float), np.asarray(wholes, dtype=float)
    if not len(whole) or whole.sum() <= 0:
        return (math.nan, math.nan, math.nan)
    share = float(part.sum() / whole.sum())
    if len(whole) < MIN_FOR_CI:
        each = part[whole > 0] / whole[whole > 0]
        return (share, float(min(each.min(), share)), float(max(each.max(), share)))
    pick = _resampled_steps(len(whole), resamples, seed)
    boot = part[pick].sum(axis=1) / np.maximum(whole[pick].sum(axis=1), 1e-12)
    low, high = np.quantile(boot, [0.025, 0.975])
    return (share, float(min(low, share)), float(max(high, share)))


def skew_interval(own: Sequence[Sequence[float]], resamples: int = RESAMPLES,
                  seed: int = 0) -> tuple[int, float, float, float]:
    """(slowest rank, skew, low, high): the slowest rank's mean time a step over the median
    of the other ranks' means (each rank's own work: its step less the all-reduce time it
    waited), with a seeded bootstrap 95% interval, the steps resampled together on every
    rank (step i of every rank is one synchronous step); ranks with fewer steps cut the
    others to theirs. From fewer than MIN_FOR_CI steps, the range of the steps' own skews."""
    import numpy as np

    steps = min(len(r) for r in own)
    a = np.asarray([list(r)[:steps] for r in own], dtype=float)  # ranks x steps
    if len(a) < 2 or steps == 0:
        return (0, math.nan, math.nan, math.nan)
    slowest = int(np.argmax(a.mean(axis=1)))
    others = np.delete(a, slowest, axis=0)

    def ratio(mine, theirs):  # any work of the slowest stands out against ranks that only waited
        return np.where(theirs > 0, mine / np.maximum(theirs, 1e-12),
                        np.where(mine > 0, np.inf, 1.0))

    skew = float(ratio(a[slowest].mean(), np.median(others.mean(axis=1))))
    if not math.isfinite(skew):
        return (slowest, skew, skew, skew)
    if steps < MIN_FOR_CI:
        each = ratio(a[slowest], np.median(others, axis=0))
        return (slowest, skew, float(min(each.min(), skew)), float(max(each.max(), skew)))
    pick = _resampled_steps(steps, resamples, seed)
    mine = a[slowest][pick].mean(axis=1)
    theirs = np.median(others[:, pick].mean(axis=2), axis=0)
    low, high = np.quantile(ratio(mine, theirs), [0.025, 0.975])
    return (slowest, skew, float(min(low, skew)), float(max(high, skew)))


def spread_ratio_interval(process: tuple[float, ...] | None, epoch: tuple[float, ...] | None,
                          resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """A seeded bootstrap 95% interval of relative spread (p10-p90 over the median) of
    `process` over that of `epoch`, each side resampled on its own; (nan, nan) with fewer
    than MIN_FOR_CI values on a side. An upper bound without limit is inf."""
    import numpy as np

    if not process or not epoch or min(len(process), len(epoch)) < MIN_FOR_CI:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)

    def spreads(values):
        v = np.asarray(values, dtype=float)
        drawn = v[rng.integers(0, len(v), (resamples, len(v)))]
        p10, p50, p90 = np.percentile(drawn, [10, 50, 90], axis=1)
        return (p90 - p10) / p50

    top, bottom = spreads(process), spreads(epoch)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.inf)
    ratios = np.where(top > 0, ratios, np.where(bottom > 0, 0.0, 1.0))  # 0/0: no difference
    # "lower": no interpolating between infinite ratios (inf - inf)
    low, high = np.percentile(ratios, [2.5, 97.5], method="lower")
    return float(low), float(high)


def cluster_median_interval(clusters: Sequence[Sequence[float]], draws: int = RESAMPLES,
                            seed: int = 0) -> tuple[float, float]:
    """A seeded bootstrap 95% percentile interval of the median absolute value over
    clusters of values that are not independent (a framework x batch fit's 16- and 32-GPU
    cells): whole clusters are resampled."""
    import numpy as np

    groups = [np.abs(np.asarray(c, dtype=float)) for c in clusters]
    rng = np.random.default_rng(seed)
    medians = [np.median(np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))]))
               for _ in range(draws)]
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def paired_median_difference(clusters: Sequence[tuple[Sequence[float], Sequence[float]]],
                             draws: int = RESAMPLES, seed: int = 0) -> Boot:
    """A seeded bootstrap 95% percentile interval of one median absolute value less
    another's, over clusters of (first, second) values, a pair per cluster: the same
    clusters are resampled for both, so a cluster hard for one is hard for the other too.
    Its verdict (which is better) turns on 0: drawn until 0 lies outside the bounds'
    Monte-Carlo error, or at the boundary (core.stats.percentile_bounds)."""
    import numpy as np

    firsts = [np.abs(np.asarray(a, dtype=float)) for a, _ in clusters]
    seconds = [np.abs(np.asarray(b, dtype=float)) for _, b in clusters]

    def draw(rng, n):  # each draw's clusters as counts: a weighted median of each side
        picked = rng.integers(0, len(clusters), (n, len(clusters)))
        counts = np.stack([np.bincount(row, minlength=len(clusters)) for row in picked])
        return _weighted_medians(firsts, counts) - _weighted_medians(seconds, counts)
    return percentile_bounds(draw, (0.0,), draws, seed)


def _weighted_medians(groups, counts):
    """For each row of `counts` (how often each group was drawn), the median of the values
    of the groups drawn, each as often as it was: np.median of their concatenation."""
    import numpy as np

    values = np.concatenate(groups)
    owner = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
    order = np.argsort(values, kind="stable")
    values, weights = values[order], counts[:, owner[order]]  # draws x values
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1]
    low = np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)  # order statistic (T-1)//2
    high = np.argmax(cum > (total // 2)[:, None], axis=1)  # and T//2: equal for odd T
    return (values[low] + values[high]) / 2
