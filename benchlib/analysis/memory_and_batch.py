"""The memory_and_batch study (notebook 15, `benchlib maxbatch`): throughput against batch
up to the largest batch that trains, and each run's boundary in one sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = "memory_and_batch"
CURVE = ["batch_size", "fits", "samples_per_s", "peak_bytes", "peak_kind", "alloc_retries",
         "param_bytes", "grad_bytes", "optimizer_state_bytes", "other_bytes", "why"]


def curve(trials: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per batch tried, by batch: whether it fit, samples/s, peak memory and its
    parts; a batch that did not fit says why."""
    return pd.DataFrame(trials).reindex(columns=CURVE).sort_values("batch_size") \
        .reset_index(drop=True)


def throughput_figure(trials: list[dict[str, Any]], metrics: dict[str, Any]):
    """samples/s against batch (log 2), the batches that did not fit marked, the largest
    that fits as a line; peak memory against the limit on a second axis."""
    import matplotlib.pyplot as plt

    df = curve(trials)
    fig, ax = plt.subplots(figsize=(7, 4))
    fit, misfit = df[df["fits"]], df[~df["fits"].astype(bool)]
    ax.plot(fit["batch_size"], fit["samples_per_s"], "o-", label="fits")
    ax.plot(misfit["batch_size"], misfit["samples_per_s"].fillna(0), "x", color="tab:red",
            label="does not fit")
    if metrics.get("largest_batch"):
        ax.axvline(metrics["largest_batch"], color="tab:green", linestyle="--",
                   label=f"largest that fits: {metrics['largest_batch']}")
    ax.set(xscale="log", xlabel="batch per device (samples)", ylabel="throughput (samples/s)",
           title=metrics.get("boundary", "throughput against batch"))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.title.set_fontsize(9)
    peak = ax.twinx()
    peak.plot(df["batch_size"], df["peak_bytes"] / 2**30, ".:", color="tab:gray",
              label="peak memory")
    if metrics.get("limit_bytes"):
        peak.axhline(metrics["limit_bytes"] / 2**30, color="tab:gray", linewidth=0.8,
                     label=f"limit ({metrics.get('limit_source', 'memory_limit')})")
    peak.set_ylabel(f"peak memory (GiB; {metrics.get('peak_kind') or 'peak'})")
    lines = ax.get_legend_handles_labels()
    extra = peak.get_legend_handles_labels()
    ax.legend(lines[0] + extra[0], lines[1] + extra[1], loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def runs(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty or "study" not in df:
        return pd.DataFrame()
    return df[(df["study"] == STUDY) & (df["status"] == "ok")]


def table(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["model", "dataset", "device_name", "memory_limit", "largest_batch",
            "smallest_batch_not_fitting", "largest_batch_samples_per_s",
            "largest_batch_peak_bytes", "peak_kind", "batches_tried"]
    return runs(df).reindex(columns=cols).reset_index(drop=True)


def part_table(records: Records) -> pd.DataFrame:
    return table(records.df)


def part_conclusions(records: Records) -> str:
    found = runs(records.df)
    if found.empty:
        return "No memory and batch runs yet (notebook 15, `benchlib maxbatch`)."
    return "\n".join(f"- {r.model} on {r.device_name}: {r.boundary}" for r in found.itertuples())
