"""The data_prep study (notebook 00): what each run prepared, real or generated."""

from __future__ import annotations

import pandas as pd

# the data sets in the order the workbook introduces them; any other after them, by name
ORDER = ("fashion_mnist", "mydataset", "cifar10", "imagefolder", "tokenfile")


def names(columns) -> list[str]:
    """The data sets a data-prep record reports (its `<name>_samples` metrics), in ORDER:
    notebook 90's table and the report's headline list the same ones."""
    found = {c[:-len("_samples")] for c in columns if str(c).endswith("_samples")}
    return sorted(found, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def table(df: pd.DataFrame) -> pd.DataFrame:
    """What each data-prep run found: per data set its source, samples and bytes."""
    rows = df[(df.get("study") == "data_prep") & (df["status"] == "ok")] if not df.empty else df
    out = []
    for _, run in rows.iterrows():
        for name in names(run.index):
            if pd.notna(run.get(f"{name}_source")):
                out.append({"run_id": run["run_id"], "dataset": name.replace("_", "-"),
                            "source": run[f"{name}_source"],
                            "samples": int(run[f"{name}_samples"]),
                            "MB": round(run[f"{name}_bytes"] / 1e6, 1)})
    return pd.DataFrame(out, columns=["run_id", "dataset", "source", "samples", "MB"])
