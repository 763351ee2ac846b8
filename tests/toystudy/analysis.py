"""The toy study's analysis: runs, headline, figure and section from one frame."""

import pandas as pd

from benchlib.analysis.claims import Claim, Figure, rows, value

ABOUT = "Toys fitted per box, from every toy run."


def runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["study"] == "toy") & (df["status"] == "ok")] if "study" in df else df


def headline(runs: pd.DataFrame):
    return [Claim(f"{value(r, 'box')} box", Figure(str(value(r, "toys_fitted")), "toys fitted",
                                                   sources=[("", r["run_id"])]))
            for r in rows(runs)], ""


def figure(records):
    import matplotlib.pyplot as plt

    toys = runs(records.df)
    fig, ax = plt.subplots()
    ax.bar(toys["box"], toys["toys_fitted"])
    ax.set(title="Toys fitted per box")
    return fig


def section(records):
    yield runs(records.df)[["box", "toys", "toys_fitted"]].reset_index(drop=True)
    yield "The toy study's section, computed by its own module."
