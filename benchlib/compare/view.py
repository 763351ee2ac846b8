"""`benchlib compare` shown: tables, sentences, the text report, the forest plot, and one
row's history across result sets (notebook 95 and the CLI)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from benchlib.compare.changes import DIRECTIONS, VERDICTS, Comparison
from benchlib.compare.sets import launches, row_key
from benchlib.core.stats import ALPHA, MIN_FOR_CI, MIN_LAUNCHES, median_interval
from benchlib.records import results


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def interval_text(row: Any) -> str:
    """`0.81-0.84`, or `n=3/3 <5, range 0.75-0.92`."""
    if row["ci95_low"] is None or (isinstance(row["ci95_low"], float) and math.isnan(row["ci95_low"])):
        return (f"n={row['n_base']}/{row['n_new']} <{MIN_FOR_CI}, range "
                f"{row['range_low']:.3f}-{row['range_high']:.3f}")
    return f"{row['ci95_low']:.3f}-{row['ci95_high']:.3f}"


def change_text(speed: float) -> str:
    pct = (speed - 1) * 100
    return f"{abs(pct):.1f}% {'faster' if pct >= 0 else 'slower'}"


def table(comparison: Comparison):
    """The rows as people read them (a DataFrame)."""
    import pandas as pd

    rows = comparison.rows
    return pd.DataFrame({
        "study": rows["study"], "table": rows["table"], "row": rows["row"],
        "metric": rows["metric"],
        "base": rows["base"].map(_num), "new": rows["new"].map(_num),
        "ratio": rows["ratio"].map(lambda x: f"{x:.3f}"),
        "95% interval": [interval_text(r) for _, r in rows.iterrows()],
        "change": rows["speed"].map(change_text),
        "n (launches)": [f"{a}/{b} ({launched})" for a, b, launched in
                         zip(rows["n_base"], rows["n_new"], rows["launches"])],
        "verdict": [f"{v} ({why})" if why else v for v, why in zip(rows["verdict"], rows["why"])],
    })


def env_table(comparison: Comparison):
    import pandas as pd

    return pd.DataFrame(comparison.env_diff, columns=["what", comparison.base.label,
                                                      comparison.new.label])


def sentences(comparison: Comparison) -> list[str]:
    """What the comparison says, computed from it."""
    c, rows = comparison, comparison.rows
    t = f"{c.threshold:.0%}" if c.threshold * 100 == round(c.threshold * 100) else f"{c.threshold:.1%}"
    counts = rows["verdict"].value_counts()
    out = [f"{c.new.label} against {c.base.label}: {rows['key'].nunique()} rows in common, "
           f"{len(rows)} comparisons at a {t} threshold: "
           + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + ".",
           f"{c.tests} of them (rows x metrics with {MIN_LAUNCHES}+ launches a side) tested "
           f"for a direction together; the verdicts are corrected for that (Holm, family-wise "
           f"alpha {ALPHA:g})."]
    for verdict_name in ("slower", "faster"):
        hits = rows[rows["verdict"] == verdict_name]
        if len(hits):
            listed = "; ".join(f"{r.table} {r.row} {r.metric} {change_text(r.speed)} "
                               f"(speed {r.speed_low:.3f}-{r.speed_high:.3f})"
                               for r in hits.itertuples())
            out.append(f"{verdict_name.capitalize()} beyond {t} with 95% confidence: {listed}.")
    if not len(rows[rows["verdict"] == "slower"]):
        out.append(f"No row is slower beyond {t} with 95% confidence.")
    held = rows[rows["why"].str.startswith("not after Holm")]
    if len(held):
        out.append(f"{len(held)} comparison(s) whose 95% interval clears {t} get no direction "
                   f"after the correction for testing {c.tests} together.")
    single = rows[rows["why"].str.endswith(("launch", "launches"))]
    if len(single):
        out.append(f"{len(single)} comparison(s) come from fewer than {MIN_LAUNCHES} launches "
                   "on a side: an interval over so few launches does not show how far launches "
                   "of one setup drift apart, so they get no verdict; add launches with "
                   "`sweep --force --label SAME`.")
    few = rows[rows["ci95_low"].isna()]
    if len(few):
        out.append(f"{len(few)} comparison(s) have fewer than {MIN_FOR_CI} values on a side "
                   "(no interval, only the range; inconclusive): give those rows repeats >= "
                   f"{MIN_FOR_CI}, or rerun them into the same set with --force.")
    out += regression_kinds(rows)
    if c.env_diff:
        shown = "; ".join(f"{w} {b} -> {a}" for w, b, a in c.env_diff[:8])
        more = f" and {len(c.env_diff) - 8} more" if len(c.env_diff) > 8 else ""
        out.append(f"What changed between the sets: {shown}{more}.")
    elif any(line.startswith("model changed") for line in c.models):
        out.append("The records show no difference in testbed or environment; the model "
                   "changed (below).")
    else:
        out.append("The records show no difference in testbed or environment: a change is "
                   "noise, or something the records do not capture.")
    out += c.health
    out += c.models
    if c.only_base or c.only_new:
        out.append(f"Not compared: {c.only_base} row(s) only in {c.base.label}, {c.only_new} "
                   f"only in {c.new.label}.")
    return out


def regression_kinds(rows: Any) -> list[str]:
    """For each row compared on both its compile time and its steady samples/s: whether
    what got slower is the compile, the steady state, or both, by the verdicts above."""
    out = []
    for key, group in rows.groupby("key", sort=False):
        got = {r.metric: r for r in group.itertuples()}
        if "compile_s" not in got or "samples_per_s" not in got:
            continue
        compile_, steady = got["compile_s"], got["samples_per_s"]
        slower = [m.verdict == "slower" for m in (compile_, steady)]
        if not any(slower):
            continue
        kind = ("a compile-time and a steady-state regression" if all(slower) else
                "a compile-time regression" if slower[0] else "a steady-state regression")
        out.append(f"{compile_.table} {compile_.row}: {kind}: compile seconds "
                   f"{change_text(compile_.speed)} ({compile_.verdict}), steady samples/s "
                   f"{change_text(steady.speed)} ({steady.verdict}).")
    return out


def text_report(comparison: Comparison) -> str:
    """What `benchlib compare` prints: the sets, the table, what changed, the verdict."""
    c = comparison
    lines = [f"base: {c.base.describe()}", f"new:  {c.new.describe()}", ""]
    lines += table(c).to_string(index=False).splitlines()
    lines.append("")
    if c.env_diff:
        lines.append("what changed:")
        width = max(len(w) for w, _, _ in c.env_diff)
        lines += [f"  {w:<{width}}  {b} -> {a}" for w, b, a in c.env_diff]
        lines.append("")
    lines += sentences(c)[:1] + [s for s in sentences(c)[1:] if not s.startswith("What changed")]
    return "\n".join(lines)


def forest_plot(comparison: Comparison, ax=None):
    """Speed (new / base performance) per comparison with its 95% interval; hollow
    markers with a thin line: too few values, the range instead. The band is the
    threshold."""
    import matplotlib.pyplot as plt

    rows = comparison.rows
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    colors = {"slower": "#b2182b", "faster": "#2166ac", "no change": "#4d4d4d",
              "inconclusive": "#999999"}
    t = comparison.threshold
    ax.axvspan(1 / (1 + t), 1 + t, color="#eeeeee", zorder=0)
    ax.axvline(1, color="#666666", lw=0.8)
    labels = []
    for y, r in enumerate(rows.itertuples()):
        labels.append(f"{r.table} {r.row} ({r.metric})")
        color = colors[r.verdict]
        if r.speed_low is None or math.isnan(r.speed_low):
            lo, hi = sorted((r.range_low, r.range_high) if DIRECTIONS[r.metric] > 0
                            else (1 / r.range_high, 1 / r.range_low))
            ax.plot([lo, hi], [y, y], color=color, lw=0.8, ls=":")
            ax.plot([r.speed], [y], "o", mfc="white", color=color)
        else:
            ax.plot([r.speed_low, r.speed_high], [y, y], color=color, lw=2)
            ax.plot([r.speed], [y], "o", color=color)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"speed, {comparison.new.label} / {comparison.base.label} (>1: faster)")
    ax.set_title(f"Changes with 95% intervals; band: ±{t:.0%} threshold")
    return ax


def trend(results_dir: str | Path, key: str, metric: str):
    """One row's metric in every result set that has it, oldest first: median, the 95%
    interval of the median (5+ values) or the range, n."""
    import pandas as pd

    from benchlib import paths

    by_set: dict[str, list[dict[str, Any]]] = {}
    for r in results.read_records(paths.resolve(results_dir)):
        if r["status"] == "ok" and row_key(r) == key:
            by_set.setdefault(r["label"], []).append(r)
    out = []
    for label, recs in by_set.items():
        groups = [g for r in recs for g in launches(r, metric)]
        vals = sorted(v for g in groups for v in g)
        if not vals:
            continue
        if len(vals) >= MIN_FOR_CI:  # resampled as compare() does: launches, then values
            low, high = median_interval(groups)
        else:
            low, high = vals[0], vals[-1]
        out.append({"label": label, "finished_at": max(r["finished_at"] for r in recs),
                    "testbed": recs[0]["testbed"]["name"], metric: statistics.median(vals),
                    "low": low, "high": high, "n": len(vals), "launches": len(groups),
                    "interval": "95% CI" if len(vals) >= MIN_FOR_CI else "range"})
    return pd.DataFrame(out).sort_values("finished_at").reset_index(drop=True) if out else \
        pd.DataFrame(columns=["label", "finished_at", "testbed", metric, "low", "high", "n",
                              "launches", "interval"])


def most_changed(comparison: Comparison) -> tuple[str, str]:
    """(row key, metric) of the comparison that moved most: the trend worth looking at."""
    rows = comparison.rows
    i = (rows["speed"].map(math.log).abs()).idxmax()
    return rows.loc[i, "key"], rows.loc[i, "metric"]


def trend_plot(history, metric: str, key: str, ax=None):
    """The trend() table as points with their interval (or range), one per result set."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.2))
    if history.empty:
        ax.set_title("no result set has this row")
        return ax
    x = range(len(history))
    ax.errorbar(x, history[metric], yerr=[history[metric] - history["low"],
                                          history["high"] - history[metric]],
                fmt="o-", capsize=4, color="#2166ac")
    ax.set_xticks(list(x), [f"{r.label}\n{r.interval}, n={r.n}\n{r.launches} launch(es)"
                            for r in history.itertuples()], fontsize=8)
    row = json.loads(key)
    params = ", ".join(f"{k}={v}" for k, v in sorted(row["params"].items()))
    ax.set_title(f"{row['table']}: {metric} across result sets", fontsize=10)
    ax.set_ylabel(metric)
    ax.text(0, -0.42, params, transform=ax.transAxes, fontsize=7, va="top", wrap=True)
    return ax
