"""The data_prep study (notebook 00): what each run prepared, real or generated."""

from __future__ import annotations

import pandas as pd


def table(df: pd.DataFrame) -> pd.DataFrame:
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
