"""The data_prep study (notebook 00): what each run prepared, real or generated; its
headline and notebook 90's section (no figure: a table says it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis.claims import Claim, Figure, rows, value
from benchlib.config import studies

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = "Which data each run prepared, and whether it was real or generated."

# the data sets in the order the workbook introduces them; any other after them, by name
ORDER = ("fashion_mnist", "mydataset", "cifar10", "imagefolder", "tokenfile")


def names(columns) -> list[str]:
    """The data sets a data-prep record reports (its `<name>_samples` metrics), in ORDER:
    notebook 90's table and the report's headline list the same ones."""
    found = {c[:-len("_samples")] for c in columns if str(c).endswith("_samples")}
    return sorted(found, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def table(df: pd.DataFrame) -> pd.DataFrame:
    """What each data-prep run found: per data set its source, samples and bytes."""
    out = []
    for _, run in runs(df).iterrows():
        for name in names(run.index):
            if pd.notna(run.get(f"{name}_source")):
                out.append({"run_id": run["run_id"], "dataset": name.replace("_", "-"),
                            "source": run[f"{name}_source"],
                            "samples": int(run[f"{name}_samples"]),
                            "MB": round(run[f"{name}_bytes"] / 1e6, 1)})
    return pd.DataFrame(out, columns=["run_id", "dataset", "source", "samples", "MB"])


def runs(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "study" not in df:
        return pd.DataFrame()
    return df[(df["study"] == STUDY) & (df["status"] == "ok")]


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """The newest preparation's data sets: samples and where they came from."""
    if runs.empty:
        return [], ""
    run = rows(runs.sort_values("finished_at"))[-1]  # the latest preparation describes the data
    claims = []
    present = [c for c in runs.columns if value(run, c) is not None]
    for name in names(present):  # the data sets the table lists, in order
        source = value(run, f"{name}_source") or "unknown source"
        claims.append(Claim(name.replace("_", "-"),
                            Figure(f"{int(value(run, f'{name}_samples')):,}",
                                   f"samples, {source}", sources=[("", run["run_id"])])))
    generated = [c for c in claims if "generated" in c.figure.what]
    caveat = ("Generated data has the real on-disk format: IO figures are comparable, "
              "accuracy figures are not." if generated else "")
    return claims, caveat


def section(records: Records):
    yield table(records.df)
