"""Tables and sentences for notebooks/90_analysis.ipynb, computed from the records.

Conclusions are written from the data here, so the analysis notebook only calls,
shows and plots; each study adds its own section.
"""

from __future__ import annotations

import pandas as pd


def overview(df: pd.DataFrame) -> pd.DataFrame:
    """One line per study: runs, ok, failed, median run time, hosts, last run."""
    if df.empty:
        return pd.DataFrame(columns=["runs", "ok", "failed", "median_run_s", "hosts", "last_run"])
    grouped = df.groupby("study")
    return pd.DataFrame({
        "runs": grouped.size(),
        "ok": grouped["status"].apply(lambda s: int((s == "ok").sum())),
        "failed": grouped["status"].apply(lambda s: int((s == "failed").sum())),
        "median_run_s": grouped["duration_s"].median().round(2),
        "hosts": grouped["host"].apply(lambda s: ", ".join(sorted(set(s.dropna())))),
        "last_run": grouped["finished_at"].max().dt.strftime("%Y-%m-%d %H:%M"),
    })


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Failed runs with their error and executed notebook."""
    cols = ["study", "run_id", "error", "executed_notebook"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    return df.loc[df["status"] == "failed", cols].reset_index(drop=True)


def data_prep(df: pd.DataFrame) -> pd.DataFrame:
    """What each data-prep run found: per data set its source, samples and bytes."""
    rows = df[(df.get("study") == "data_prep") & (df["status"] == "ok")] if not df.empty else df
    out = []
    for _, run in rows.iterrows():
        for name in ("fashion_mnist", "mydataset"):
            if pd.notna(run.get(f"{name}_source")):
                out.append({"run_id": run["run_id"], "dataset": name.replace("_", "-"),
                            "source": run[f"{name}_source"],
                            "samples": int(run[f"{name}_samples"]),
                            "MB": round(run[f"{name}_bytes"] / 1e6, 1)})
    return pd.DataFrame(out, columns=["run_id", "dataset", "source", "samples", "MB"])


def overview_text(df: pd.DataFrame) -> str:
    """The opening paragraph of the analysis, in Markdown."""
    if df.empty:
        return "No records yet: run a sweep (`python -m benchlib sweep params/smoke_cpu.yaml`)."
    ok = int((df["status"] == "ok").sum())
    failed = len(df) - ok
    text = (f"**{len(df)} runs** in {df['study'].nunique()} studies: {ok} ok, {failed} failed, "
            f"measured on {', '.join(sorted(set(df['host'].dropna())))} "
            f"between {df['started_at'].min():%Y-%m-%d %H:%M} and "
            f"{df['finished_at'].max():%Y-%m-%d %H:%M} UTC.")
    generated = data_prep(df)
    if not generated.empty and (generated["source"] == "generated").any():
        text += (" Some data sets were **generated offline** in the real on-disk format: "
                 "IO figures are comparable, accuracy figures are not.")
    if failed:
        text += " Failed runs are listed below with their errors; their numbers are not used."
    methods = sorted(set(df["method_version"]))
    if len(methods) > 1:
        text += f" Records span method versions {', '.join(methods)}: compare within one."
    return text
