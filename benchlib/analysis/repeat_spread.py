"""How much a row's throughput moves, measured two ways, side by side.

A record's spread is p10-p90 of its samples/s over its repeats, as a fraction of the
median. What a repeat is, is the record's `repeat_mode` (benchlib.studies.repeats):
`epoch` (epochs inside one launch, which share its luck) or `process` (a fresh launch
each). Where the same row has records of both modes, the two spreads are shown together
with a sentence computed from them: how much wider (or narrower) the spread across
launches is than the spread inside one.
"""

from __future__ import annotations

import math

import pandas as pd

# parameters that say how a row is repeated or where it reads its data, not what it runs:
# records differing only in these are the same row measured two ways
NOT_THE_ROW = ("repeat_mode", "repeats", "epochs", "timeout_s", "join_timeout_s", "path",
               "allreduce", "allreduce_max_bytes")
UNITS = {"epoch": "epochs of one launch", "process": "launches"}
SAME = 1.25  # spreads within this factor of each other are "about the same"


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
    of both modes: each mode's newest record's spread, n and median, and their ratio."""
    cols = [*shown, "epoch_spread", "epoch_n", "process_spread", "process_n", "ratio"]
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
        lines.append(line)
    return pd.DataFrame(lines, columns=cols)


def sentences(spreads: pd.DataFrame, shown: list[str]) -> list[str]:
    """One sentence per line of `table()`, the comparison computed from the spreads."""
    parts = []
    for _, r in spreads.iterrows():
        what = ", ".join(f"{c} {r[c]}" for c in shown)
        both = (f"spread (p10-p90 over the median) {r['epoch_spread']:.1%} over "
                f"{r['epoch_n']} {UNITS['epoch']}, {r['process_spread']:.1%} over "
                f"{r['process_n']} {UNITS['process']}")
        parts.append(f"- Repeats of {what}: {both}: {verdict(r['ratio'])}.")
    return parts


def verdict(ratio: float) -> str:
    if math.isnan(ratio):
        return "the epochs of one launch did not vary, so there is no ratio to give"
    if ratio >= SAME:
        return (f"the spread across launches is {ratio:.1f}x the spread inside one, so an "
                "interval from epochs understates how much a rerun moves")
    if ratio <= 1 / SAME:
        return (f"the spread inside one launch is {1 / ratio:.1f}x the spread across "
                "launches: here the epochs of a launch varied more than the launches did")
    return f"about the same either way (ratio {ratio:.2f})"
