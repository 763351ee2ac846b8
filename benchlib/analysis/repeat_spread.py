"""How much a row's throughput moves, measured two ways, side by side.

A record's spread is p10-p90 of its samples/s over its repeats, as a fraction of the
median. What a repeat is, is the record's `repeat_mode` (benchlib.studies.repeats):
`epoch` (epochs inside one launch, which share its luck) or `process` (a fresh launch
each). Where the same row has records of both modes, the two spreads are shown together
with a sentence computed from them: how much wider (or narrower) the spread across
launches is than the spread inside one, with a seeded bootstrap 95% interval of that
ratio (each side's values resampled: the epochs of the epoch record, the launches of the
process record). A direction only when the interval excludes 1; "the same" only when the
interval lies inside SAME_WITHIN either way (an equivalence test: holding 1 is not
evidence of sameness, and at 6 values a side a true 2x ratio of spreads gave intervals
that held 1 in 176 of 200 trials, issue 43); otherwise "not enough values to tell", with
the values a side that would tell; "cannot tell" when a side has fewer than MIN_FOR_CI
values (or the records keep none), as for any interval here.
"""

from __future__ import annotations

import math

import pandas as pd

from benchlib.core.intervals import spread_ratio_interval
from benchlib.core.stats import MIN_FOR_CI, needed_for_sameness

# parameters that say how a row is repeated or where it reads its data, not what it runs:
# records differing only in these are the same row measured two ways
NOT_THE_ROW = ("repeat_mode", "repeats", "epochs", "timeout_s", "join_timeout_s", "path",
               "allreduce", "allreduce_max_bytes")
UNITS = {"epoch": "epochs of one launch", "process": "launches"}
# two spreads within this factor of each other, either way, are the same for a user
# choosing how to repeat a row: what an interval from epochs gets wrong by less than 1.5x
# does not change which repeat mode to trust
SAME_WITHIN = 1.5
VALUES = {"epoch": "samples_per_s_epochs", "process": "samples_per_s_launches"}


def modes(runs: pd.DataFrame) -> pd.Series:
    """Each run's repeat_mode; records from before it existed repeated by epoch."""
    if "repeat_mode" not in runs:
        return pd.Series("epoch", index=runs.index)
    return runs["repeat_mode"].fillna("epoch")


def within(runs: pd.DataFrame) -> str:
    """What one record's own values are: launches when every run repeated by process."""
    return "launches" if len(runs) and (modes(runs) == "process").all() else "epochs"


def relative_spread(run: pd.Series) -> float:
    """p10-p90 of samples/s over the median, or NaN without them."""
    median = run.get("samples_per_s")
    if median is None or pd.isna(median) or median <= 0:
        return math.nan
    return (run["samples_per_s_p90"] - run["samples_per_s_p10"]) / median


def table(runs: pd.DataFrame, fields: list[str], shown: list[str]) -> pd.DataFrame:
    """One line per row (same `fields` but NOT_THE_ROW, same hardware) that has records
    of both modes: each mode's newest record's spread, n and median, their ratio, and a
    95% interval of the ratio (spread_ratio_interval; NaN where it cannot be given)."""
    cols = [*shown, "epoch_spread", "epoch_n", "process_spread", "process_n", "ratio",
            "ratio_low", "ratio_high"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = runs.assign(repeat_mode=modes(runs))
    key = [f for f in fields if f in runs and f not in NOT_THE_ROW] + ["hardware"]
    lines = []
    for _, group in runs.groupby(key, dropna=False):
        newest = {mode: g.sort_values("finished_at").iloc[-1]
                  for mode, g in group.groupby("repeat_mode")}
        if set(newest) != {"epoch", "process"}:
            continue
        line = {c: newest["process"].get(c) for c in shown}
        for mode, run in newest.items():
            line[f"{mode}_spread"] = relative_spread(run)
            line[f"{mode}_n"] = int(run["samples_per_s_n"])
        line["ratio"] = line["process_spread"] / line["epoch_spread"] \
            if line["epoch_spread"] > 0 else math.nan
        line["ratio_low"], line["ratio_high"] = spread_ratio_interval(
            _values(newest["process"], "process"), _values(newest["epoch"], "epoch"))
        lines.append(line)
    return pd.DataFrame(lines, columns=cols)


def _values(run: pd.Series, mode: str) -> tuple[float, ...] | None:
    """The values a record's spread was taken over, where the frame has them."""
    values = run.get(VALUES[mode])
    return tuple(values) if isinstance(values, (tuple, list)) and len(values) else None


def sentences(spreads: pd.DataFrame, shown: list[str]) -> list[str]:
    """One sentence per line of `table()`, the comparison computed from the spreads."""
    parts = []
    for _, r in spreads.iterrows():
        what = ", ".join(f"{c} {r[c]}" for c in shown)
        both = (f"spread (p10-p90 over the median) {r['epoch_spread']:.1%} over "
                f"{r['epoch_n']} {UNITS['epoch']}, {r['process_spread']:.1%} over "
                f"{r['process_n']} {UNITS['process']}")
        low, high = r.get("ratio_low", math.nan), r.get("ratio_high", math.nan)
        n = min(r["epoch_n"], r["process_n"])
        parts.append(f"- Repeats of {what}: {both}: {wider(r['ratio'], low, high, n)}.")
    return parts


def wider(ratio: float, low: float = math.nan, high: float = math.nan,
            n: int = 0) -> str:
    """Which spread is wider, only where a 95% interval of their ratio excludes 1."""
    if math.isnan(ratio):
        return "the epochs of one launch did not vary, so there is no ratio to give"
    if math.isnan(low) or math.isnan(high):
        why = (f"an interval needs {MIN_FOR_CI}+ values a side" if n < MIN_FOR_CI else
               "the records keep no per-epoch and per-launch values to give an interval from")
        return f"cannot tell which is wider (ratio {ratio:.2f}; {why})"
    interval = f"95% interval {low:.2f}-{_bound(high)}"
    if low > 1:
        return (f"the spread across launches is {ratio:.1f}x the spread inside one "
                f"({interval}), so an interval from epochs understates how much a rerun moves")
    if high < 1:
        return (f"the spread inside one launch is {1 / ratio:.1f}x the spread across "
                f"launches ({interval}): here the epochs of a launch varied more than the "
                "launches did")
    if low >= 1 / SAME_WITHIN and high <= SAME_WITHIN:
        return (f"the same within {SAME_WITHIN:g}x either way (ratio {ratio:.2f}, {interval}, "
                f"n={n} a side)")
    need = needed_for_sameness(n, low, high, SAME_WITHIN, ratio)
    would = (f"about {need} values a side would tell whether they are the same within "
             f"{SAME_WITHIN:g}x" if need else f"no number of values would show them the "
             f"same within {SAME_WITHIN:g}x")
    return (f"not enough values to tell: no direction, and not shown the same (ratio "
            f"{ratio:.2f}, {interval}, n={n} a side; {would})")


def _bound(value: float) -> str:
    return "no upper bound" if math.isinf(value) else f"{value:.2f}"
