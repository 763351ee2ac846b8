"""Notebook 10's shard rows as the input-pipeline table: per row (data set, format, store and
link, workers, prefetch, shard size, cache, how the workers start) over its launches (a
sweep run again with `--force` adds one to every row), the cold first batch, epoch 1's and epoch 2's samples/s
and the stall seconds of an epoch, each the median of the launches with its 95% interval
(the order-statistic one, from 5 launches) and n; and the rows that differ from another in
one knob, compared by the one verdict rule (analysis/sides.py).

`python -m benchlib.analysis.io_pipeline [--outputs DIR] [--label L]` prints the table as
Markdown (docs/studies.md's came from it).
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from benchlib.analysis import sides
from benchlib.core.stats import summarize

ROW = ["dataset", "mode", "variant", "link", "num_workers", "prefetch_factor", "shard_mb",
       "cache", "multiprocessing_context"]
KNOBS = ("num_workers", "prefetch_factor", "shard_mb", "cache", "multiprocessing_context")
# what a record made before the knob existed ran: the DataLoader's default on Linux
BEFORE = {"multiprocessing_context": "fork"}
FIGURES = [("first_batch_cold_s", "first batch, s", "{:.2f}"),
           ("epoch1_samples_per_s", "epoch 1, samples/s", "{:,.0f}"),
           ("epoch2_samples_per_s", "epoch 2, samples/s", "{:,.0f}"),
           ("stall_s", "stalls, s an epoch", "{:.2f}")]


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok records of shard rows (those with a `shard_format`)."""
    if df.empty or "shard_format" not in df:
        return pd.DataFrame(columns=ROW)
    ok = df[(df["shard_format"].notna()) & (df.get("status", "ok") == "ok")]
    return ok.assign(**{c: ok[c] if c in ok else None for c in ROW}).fillna(BEFORE)


def failed(df: pd.DataFrame) -> pd.DataFrame:
    """The failed launches of shard rows, with their row's knobs (the link in words from
    their parameters) and the error's last line."""
    from types import SimpleNamespace

    from benchlib.config.choices import SHARD_FORMATS
    from benchlib.studies.io_shards import link_text

    if df.empty or "variant" not in df or "status" not in df:
        return pd.DataFrame(columns=[*ROW, "error"])
    bad = df[(df["status"] == "failed") & df["variant"].isin(SHARD_FORMATS)]
    rows = []
    for _, r in bad.iterrows():
        params = {k: r.get(k) for k in ("store", "store_endpoint", "link_mibps",
                                        "link_latency_ms")}
        rows.append({**{c: r.get(c) for c in ROW}, "link": link_text(SimpleNamespace(**params)),
                     "error": (str(r.get("error") or "").splitlines() or [""])[-1]})
    return pd.DataFrame(rows, columns=[*ROW, "error"]).fillna(BEFORE)


def _cell(values: list[float], fmt: str) -> str:
    """The median [its interval]: the 95% order-statistic interval from 6 launches; from 2
    to 5, the min-max, followed by the coverage it has (5 launches: 94%)."""
    s = summarize(values, "v")
    if not values:
        return ""
    text = fmt.format(s["v"])
    if not math.isnan(s["v_ci95_low"]):
        text += f" [{fmt.format(s['v_ci95_low'])}, {fmt.format(s['v_ci95_high'])}]"
    elif len(values) >= 2:
        text += (f" [{fmt.format(s['v_min'])}, {fmt.format(s['v_max'])}] "
                 f"({s['v_ci95_coverage']:.0%})")
    return text


def table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per row: its knobs, n launches (and how many more failed), and each
    figure's median [95% CI] over the launches that finished."""
    io, lost = runs(df), failed(df)
    every = pd.concat([io[ROW], lost[ROW]]) if not lost.empty else io[ROW]
    lines = []
    for keys, _ in every.groupby(ROW, dropna=False, sort=True):
        line = dict(zip(ROW, keys))
        group = io[(io[ROW].astype(str) == pd.Series(line).astype(str)).all(axis=1)]
        lost_here = lost[(lost[ROW].astype(str) == pd.Series(line).astype(str)).all(axis=1)] \
            if not lost.empty else lost
        line["n"] = len(group)
        line["failed"] = len(lost_here)
        for col, name, fmt in FIGURES:
            line[name] = _cell([float(v) for v in group[col].dropna()] if col in group else [], fmt)
        lines.append(line)
    return pd.DataFrame(lines)


def one_knob(df: pd.DataFrame) -> list[str]:
    """Each pair of rows that differ in one knob: which is faster in epoch 1, by the verdict
    rule over their launches."""
    io = runs(df)
    said = []
    if io.empty:
        return said
    for knob in KNOBS:
        rest = [c for c in ROW if c != knob]
        for _, group in io.groupby(rest, dropna=False, sort=True):
            values = sorted(group[knob].dropna().unique(), key=str)
            for i, a in enumerate(values):
                for b in values[i + 1:]:
                    left = sides.side(f"{knob}={b}", group[group[knob] == b], "epoch1_samples_per_s")
                    right = sides.side(f"{knob}={a}", group[group[knob] == a], "epoch1_samples_per_s")
                    where = f"{group['variant'].iloc[0]}, {group['link'].iloc[0]}"
                    said.append(f"{where}: {sides.judged(left, right)}")
    return said


def markdown(tab: pd.DataFrame) -> str:
    if tab.empty:
        return "(no shard rows)"
    cols = ["variant", "link", "num_workers", "prefetch_factor", "shard_mb", "cache",
            "multiprocessing_context", "n", "failed", *[name for _, name, _ in FIGURES]]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in tab.iterrows():
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchlib import paths
    from benchlib.records.results import load_results

    parser = argparse.ArgumentParser(prog="python -m benchlib.analysis.io_pipeline",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", help="outputs folder (default: $BENCHLIB_OUTPUTS or outputs/)")
    parser.add_argument("--label", help="the result set (default: every record)")
    args = parser.parse_args(argv)
    out = paths.resolve(args.outputs) if args.outputs else paths.outputs_dir()
    df = load_results(out / "results", label=args.label)
    print(markdown(table(df)))
    for line in one_knob(df):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
