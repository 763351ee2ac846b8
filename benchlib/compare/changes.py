"""Two result sets side by side: did an upgrade, a new node type or a new setting make
anything slower? (`python -m benchlib compare BASE NEW`, notebook 95.)

Rows are matched by study and parameters (where the data lives is left out of the
match). For each metric with a direction (samples_per_s up, step_s down, ...) a row
gets before and after (medians), the ratio new / base, and a bootstrap 95% interval of
that ratio from the per-repeat values the records keep (`details.repeats` or
`details.epochs`), resampled as launches first, then values within each launch: each
record of the row in the set is a launch (`sweep --force --label SAME` adds one), and
notebook 30's epochs are grouped by the launch (`repeat`) they came from. With fewer
than 5 values on a side there is no interval: the range of possible ratios is shown
with n, and the verdict is inconclusive. The verdict is the rule notebook 90 uses too
(benchlib.core.stats.direction_verdict).

The verdict is on speed (new performance / base: the ratio for a metric where higher is
better, its inverse where lower is): `slower` when the whole interval lies below
1 / (1 + threshold), `faster` when above 1 + threshold, `no change` when inside both,
`inconclusive` when it crosses a boundary, with too few values, or with fewer than 5
launches on a side: repeats inside one process share its luck, on a shared machine whole
launches of one setup drift far apart (docs/compare.md), and a bootstrap over 2 to 4
launches finds a direction in identical data far more often than 5% of the time.

One call tests many rows x metrics at once, and at 95% each, ten of them name a
direction in identical data far more often than 5% of the time. So the comparisons that
can get a direction (5+ launches a side) are one family: each gets a bootstrap p-value
(core.stats.direction_p, the share of resampled speeds on the wrong side of the
bound, the percentile interval read the other way), and a direction stands only where
Holm's step-down at a family-wise alpha of 0.05 rejects it (core.stats.holm); a row whose
95% interval clears the threshold but fails the correction is `inconclusive`. The
verdict column is the corrected one, and the exit status counts its `slower` rows: what
is shown is what fails the call. One comparison is a family of one: the 95% rule.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# default_pair, env_diff and launches are also read from here (changes.default_pair, ...)
from benchlib.compare.sets import (
    Reader,
    ResultSet,
    default_pair,
    describe_rows,
    env_diff,
    group_rows,
    health_changes,
    labels_line,
    launches,
    open_set,
    per_repeat,
    row_changes,
    values,
)
from benchlib.core.stats import (
    ALPHA,
    DEFAULT_THRESHOLD,
    MIN_FOR_CI,
    MIN_LAUNCHES,
    RESAMPLES,
    Ratio,
    direction_p,
    direction_verdict,
    holm,
    ratio_interval,
    resamples_for,
)
from benchlib.errors import UsageError
from benchlib.records import results

# +1: higher is better; -1: lower is better. Metrics without a direction are not compared.
DIRECTIONS = {
    "samples_per_s": +1, "samples_per_s_per_device": +1, "jax_samples_per_s": +1,
    "speedup": +1, "efficiency": +1, "mfu": +1, "busbw_gbps": +1, "algbw_gbps": +1,
    "step_s": -1, "batch_s": -1, "epoch_s": -1, "data_s": -1, "compute_s": -1,
    "total_s": -1, "launch_s": -1, "recovery_s": -1, "prep_s": -1, "allreduce_latency_s": -1,
    "tokens_per_s": +1, "energy_j_per_sample": -1, "cost_per_million_samples": -1,
    # what checkpoints cost (benchlib.core.checkpoint_cost): seconds a save stalls training,
    # until it is durable, a restore's
    "checkpoint_blocking_s": -1, "checkpoint_total_s": -1, "restore_s": -1,
    "compile_s": -1,
}
# A row's metric when none is asked for: the first of these it has.
PRIMARY = ("samples_per_s", "busbw_gbps", "recovery_s", "total_s", "prep_s")
# compared beside the primary one wherever both sides have it: a compiled row's compile
# time, so that a compile-time regression is told apart from a steady-state one
ALSO = ("compile_s",)
VERDICTS = ("slower", "inconclusive", "no change", "faster")


def parse_threshold(text: str | float) -> float:
    """`5%` or `0.05` -> 0.05."""
    value = str(text).strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        number = math.nan
    if not 0 < number < 1:
        raise UsageError(f"threshold: {text!r} must be a percentage like 5% or a fraction "
                         "like 0.05, above 0 and below 100%")
    return number


# ------------------------------------------------------------------------ comparison

@dataclass
class Comparison:
    base: ResultSet
    new: ResultSet
    threshold: float
    rows: Any  # pandas DataFrame, one row per (row, metric), slowest first
    only_base: int  # rows only one side has
    only_new: int
    env_diff: list[tuple[str, str, str]] = field(default_factory=list)
    tests: int = 0  # comparisons judged together for a direction (Holm's m)
    health: list[str] = field(default_factory=list)  # devices or node pairs that got slower
    models: list[str] = field(default_factory=list)  # rows whose model or stack changed

    @property
    def slower(self):
        return self.rows[self.rows["verdict"] == "slower"]

    def exit_code(self) -> int:
        """1 when any row is slower beyond the threshold with confidence after the
        family-wise correction (the verdict column), else 0."""
        return 1 if len(self.slower) else 0



def _names(record: dict[str, Any]) -> set[str]:
    """The names `--study` picks a record by: its study (config/studies.py) and its table."""
    return {record["study"], record["table"]}


def _check_studies(studies: Iterable[str] | None, records: list[dict[str, Any]]) -> list[str]:
    """The studies asked for, each one the sets have (UsageError otherwise)."""
    studies = list(studies or [])
    if studies:
        known = sorted(set().union(*(_names(r) for r in records)))
        unknown = [s for s in studies if s not in known]
        if unknown:
            raise UsageError(f"study: {unknown[0]!r} is in neither set; studies: "
                             f"{', '.join(known)}")
    return studies


def _common(base: ResultSet, new: ResultSet, b_rows: dict[str, Any],
            n_rows: dict[str, Any]) -> list[str]:
    """The row keys both sets have, sorted (UsageError when there are none)."""
    common = sorted(set(b_rows) & set(n_rows))
    if not common:
        def tables_of(rows):
            return ", ".join(sorted({json.loads(k)["table"] for k in rows})) or "none"
        raise UsageError(f"no rows in common: {base.label} has tables {tables_of(b_rows)}, "
                         f"{new.label} has {tables_of(n_rows)} (none with the same parameters)")
    return common


def _check_metrics(metrics: Iterable[str] | None) -> list[str]:
    """The metrics asked for ('all': every one with a direction); UsageError for one
    without a direction."""
    metrics = list(metrics or [])
    if "all" in metrics:
        metrics = list(DIRECTIONS)
    unknown = [m for m in metrics if m not in DIRECTIONS]
    if unknown:
        raise UsageError(f"metric: {unknown[0]!r} has no direction to compare; metrics: all, "
                         f"{', '.join(DIRECTIONS)}")
    return metrics


def _row_metrics(metrics: list[str], b_recs: list[dict[str, Any]],
                 n_recs: list[dict[str, Any]]) -> list[str]:
    """The metrics of one row to compare: those asked for (none: its primary one) that
    both sides have."""
    wanted = metrics or [next((m for m in PRIMARY if _has(b_recs, m) and _has(n_recs, m)),
                              None), *ALSO]
    return [m for m in wanted
            if m is not None and _has(b_recs, m) and _has(n_recs, m)]


def _groups(records: list[dict[str, Any]], metric: str) -> list[list[float]]:
    """A row's values of `metric`, one list per launch, over its records."""
    return [g for r in records for g in launches(r, metric)]


def _metric_row(key: str, name: str, b_recs: list[dict[str, Any]], b_vals: list[list[float]],
                n_vals: list[list[float]], metric: str, threshold: float,
                resamples: int) -> dict[str, Any]:
    """One (row, metric) of the comparison, its verdict before the family's correction."""
    r = ratio_interval(b_vals, n_vals, resamples, threshold=threshold)
    up = DIRECTIONS[metric] > 0
    speed, s_lo, s_hi = (r.ratio, r.low, r.high) if up else (
        1 / r.ratio, None if r.high is None else 1 / r.high,
        None if r.low is None else 1 / r.low)
    n_launches = min(len(b_vals), len(n_vals))
    tested = r.boot is not None and n_launches >= MIN_LAUNCHES
    return {
        "study": b_recs[0]["study"], "table": b_recs[0]["table"], "row": name, "metric": metric,
        "base": statistics.median([v for g in b_vals for v in g]),
        "new": statistics.median([v for g in n_vals for v in g]),
        "ratio": r.ratio, "ci95_low": r.low, "ci95_high": r.high,
        "range_low": r.range_low, "range_high": r.range_high,
        "n_base": r.n_base, "n_new": r.n_new,
        "launches": f"{len(b_vals)}/{len(n_vals)}",
        "values_from": per_repeat(b_recs[0], metric)[0],
        "speed": speed, "speed_low": s_lo, "speed_high": s_hi,
        # the direction's p-value, before the correction; None: not tested for one
        "p": direction_p(r.boot if up else 1 / r.boot, threshold) if tested else None,
        "verdict": direction_verdict(s_lo, s_hi, threshold, n_launches,
                                     at_boundary=r.at_boundary),
        "why": _why(r, s_lo, s_hi, threshold, n_launches),
        "at_boundary": r.at_boundary,
        "mc_error": r.mc.mc_error if r.mc is not None else None,
        "resamples": r.mc.resamples if r.mc is not None else None,
        "key": key,
    }


def _correct(out: list[dict[str, Any]], threshold: float) -> None:
    """Holm across the family: a direction whose test the step-down does not reject
    becomes inconclusive, saying so."""
    tested = [row for row in out if row["p"] is not None]
    for row, rejects in zip(tested, holm([row["p"] for row in tested], ALPHA)):
        before = row["verdict"]
        row["verdict"] = direction_verdict(row["speed_low"], row["speed_high"], threshold,
                                           MIN_LAUNCHES, rejects, row["at_boundary"])
        if row["verdict"] != before:
            row["why"] = f"not after Holm, p={row['p']:.2g}"


def _slowest_first(out: list[dict[str, Any]]):
    """The rows as a DataFrame, by verdict (slower first), then by speed."""
    import pandas as pd

    rows = pd.DataFrame(out)
    rows["order"] = rows["verdict"].map({v: i for i, v in enumerate(VERDICTS)})
    return rows.sort_values(["order", "speed"]).drop(columns="order").reset_index(drop=True)


def compare(base: ResultSet, new: ResultSet, threshold: float = DEFAULT_THRESHOLD,
            metrics: Iterable[str] | None = None, studies: Iterable[str] | None = None,
            resamples: int = RESAMPLES) -> Comparison:
    """Match the two sets' rows and compare each metric; UsageError on bad input."""
    if base.label == new.label and base.where == new.where:
        raise UsageError(f"BASE and NEW are both result set {base.label}: compare two "
                         "different sets")
    studies = _check_studies(studies, base.records + new.records)
    pick = (lambda rs: [r for r in rs if _names(r) & set(studies)]) if studies else list
    b_rows = group_rows(pick(base.records), base.label)
    n_rows = group_rows(pick(new.records), new.label)
    common = _common(base, new, b_rows, n_rows)
    metrics = _check_metrics(metrics)
    names = describe_rows([r for k in common for r in b_rows[k] + n_rows[k]])
    pairs = [(key, metric, _groups(b_rows[key], metric), _groups(n_rows[key], metric))
             for key in common for metric in _row_metrics(metrics, b_rows[key], n_rows[key])]
    # a ratio needs a base median above 0
    pairs = [p for p in pairs if statistics.median([v for g in p[2] for v in g]) > 0]
    tests = sum(min(len(b), len(n)) >= MIN_LAUNCHES for _, _, b, n in pairs)
    resamples = resamples_for(tests, resamples)
    out = [_metric_row(key, names[key], b_rows[key], b, n, metric, threshold, resamples)
           for key, metric, b, n in pairs]
    _correct(out, threshold)
    if not out:
        asked = ", ".join(metrics) if metrics else "a primary metric (" + ", ".join(PRIMARY) + ")"
        raise UsageError(f"metric: no row common to both sets has {asked} on both sides")
    return Comparison(base, new, threshold, _slowest_first(out), len(set(b_rows) - set(n_rows)),
                      len(set(n_rows) - set(b_rows)), env_diff(base.records, new.records),
                      sum(row["p"] is not None for row in out),
                      health_changes(base, new, threshold),
                      row_changes(b_rows, n_rows, names))


def _why(r: Ratio, low: float | None, high: float | None, threshold: float,
         n_launches: int) -> str:
    """Why a comparison is inconclusive ('' when it is not)."""
    if r.low is None:
        return f"n<{MIN_FOR_CI}"
    if n_launches < MIN_LAUNCHES:
        return f"{n_launches} launch{'es' if n_launches != 1 else ''}"
    if r.at_boundary:  # a threshold within the bound's Monte-Carlo error after every draw
        return f"at the boundary ({r.mc.text()})"
    return "spans threshold" if direction_verdict(low, high, threshold, n_launches) == "inconclusive" else ""


def _has(records: list[dict[str, Any]], metric: str) -> bool:
    return any(values(r, metric) for r in records)


def compare_sets(base: str, new: str, results_dir: str | Path = "outputs/results",
                 threshold: float | str = DEFAULT_THRESHOLD, metrics: Iterable[str] | None = None,
                 studies: Iterable[str] | None = None) -> Comparison:
    """`compare()` from two labels or folders; both empty: the newest set against the
    newest older one that shares a row with it (default_pair)."""
    from benchlib import paths

    results_dir = paths.resolve(results_dir)
    if not base and not new:
        pair = default_pair(results_dir)
        if pair is None:
            raise UsageError(f"no two result sets share a row in {results_dir}; "
                             f"{labels_line(results.read_records(results_dir))}")
        base, new = pair
    if not base or not new:
        raise UsageError("base, new: give both, or neither (the two newest sets)")
    read = Reader()
    return compare(open_set(base, results_dir, read), open_set(new, results_dir, read),
                   parse_threshold(threshold), metrics, studies)

