"""The analysis' opening: every study's runs, the failed ones, and the paragraph that
says what the records hold."""

from __future__ import annotations

import pandas as pd

from benchlib.analysis import data_prep


def table(df: pd.DataFrame) -> pd.DataFrame:
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


def failures(df: pd.DataFrame) -> pd.DataFrame | str:
    """Failed runs with their error and executed notebook; a sentence when there is none
    (an empty table shows only its header)."""
    cols = ["study", "table", "run_id", "error", "executed_notebook"]
    failed = df[df["status"] == "failed"] if not df.empty else df
    if failed.empty:
        return "None: every run finished ok."
    cols = [c for c in cols if c in df]  # a frame built by hand may lack `table`
    return failed[cols].reset_index(drop=True)


def text(df: pd.DataFrame) -> str:
    """The opening paragraph of the analysis, in Markdown."""
    if df.empty:
        return "No records yet: run a sweep (`python -m benchlib sweep params/smoke_cpu.yaml`)."
    ok = int((df["status"] == "ok").sum())
    failed = len(df) - ok
    text = (f"**{len(df)} runs** in {df['study'].nunique()} studies: {ok} ok, {failed} failed, "
            f"measured on {', '.join(sorted(set(df['host'].dropna())))} "
            f"between {df['started_at'].min():%Y-%m-%d %H:%M} and "
            f"{df['finished_at'].max():%Y-%m-%d %H:%M} UTC.")
    generated = data_prep.table(df)
    if not generated.empty and (generated["source"] == "generated").any():
        text += (" Some data sets were **generated offline** in the real on-disk format: "
                 "IO figures are comparable, accuracy figures are not.")
    if failed:
        text += " Failed runs are listed below with their errors; their numbers are not used."
    methods = sorted(set(df["method_version"]))
    if len(methods) > 1:
        text += f" Records span method versions {', '.join(methods)}: compare within one."
    return text


def wall_time_plot(df: pd.DataFrame):
    """Each run's wall time per study, coloured by status (nothing without records)."""
    if df.empty:
        return None
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots()
    sns.stripplot(data=df, x="duration_s", y="study", hue="status", jitter=0.2, ax=ax)
    ax.set(xlabel="run wall time (s)", ylabel="", title="Wall time of each run")
    return fig
