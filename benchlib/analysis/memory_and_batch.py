"""The memory_and_batch study (notebook 15, `benchlib maxbatch`): throughput against batch
up to the largest batch that trains, and each run's boundary in one sentence; its
headline, main figure and notebook 90's section, all from `runs()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

from benchlib.analysis.claims import Claim, Figure, rows, value, work_text
from benchlib.config import studies

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Each search's largest batch, confirmed in fresh processes, its throughput, peak "
         "memory and margin to the limit, and the first batch that never fit (a memory limit, "
         "CUDA's memory, or the OS).")
CURVE = ["batch_size", "process", "fits", "samples_per_s", "peak_bytes", "peak_kind",
         "model_peak_bytes", "alloc_retries", "param_bytes", "grad_bytes_at_peak",
         "optimizer_state_bytes", "activation_bytes", "other_bytes", "why"]


def curve(trials: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per process, by batch: whether it fit, samples/s, peak memory, the model's
    own bytes and what the memory held at a profiled step's peak; a batch that did not
    fit says why."""
    return pd.DataFrame(trials).reindex(columns=CURVE).sort_values(["batch_size", "process"]) \
        .reset_index(drop=True)


def throughput_figure(trials: list[dict[str, Any]], metrics: dict[str, Any]):
    """samples/s against batch (log 2), the batches that did not fit marked, the largest
    that fits as a line; peak memory against the limit on a second axis."""
    import matplotlib.pyplot as plt

    df = curve(trials)
    fig, ax = plt.subplots(figsize=(7, 4))
    fit, misfit = df[df["fits"].astype(bool)], df[~df["fits"].astype(bool)]
    rate = fit.groupby("batch_size")["samples_per_s"].median()
    ax.plot(rate.index, rate.values, "-", color="tab:blue", label="fits (median)")
    ax.plot(fit["batch_size"], fit["samples_per_s"], "o", color="tab:blue", markersize=4)
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


def table(found: pd.DataFrame) -> pd.DataFrame:
    cols = ["model", "dataset", "precision", "device_name", "memory_limit", "largest_batch",
            "largest_batch_processes", "smallest_batch_not_fitting", "misfit_processes",
            "largest_batch_samples_per_s", "largest_batch_peak_bytes", "margin_bytes",
            "peak_kind", "batches_tried", "trials"]
    return found.reindex(columns=cols).reset_index(drop=True)


def headline(found: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per search: the largest batch that trains, and where the next one up stopped."""
    claims = []
    for run in rows(found.sort_values("finished_at")):
        largest = value(run, "largest_batch")
        figure = None if largest is None else Figure(
            f"batch {int(largest)}", "the largest that trains", sources=[("", run["run_id"])])
        limit = value(run, "memory_limit")
        subject = work_text(run, ("model", "dataset")) + (f", limit {limit}" if limit else "")
        claims.append(Claim(subject, figure, note=value(run, "boundary") or ""))
    return claims, ""


def figure(records: Records):
    """The newest search's throughput against batch, with its boundary and peak memory."""
    found = runs(records.df)
    trials = records.details("trials")
    if found.empty or trials.empty:
        return None
    newest = found.sort_values("finished_at").iloc[-1]
    mine = trials[trials["run_id"] == newest["run_id"]]
    if mine.empty:
        return None
    metrics = {k: value(newest, k) for k in ("largest_batch", "boundary", "limit_bytes",
                                             "limit_source", "peak_kind")}
    return throughput_figure(mine.to_dict("records"), metrics)


def section(records: Records):
    found = runs(records.df)
    yield table(found)
    yield "\n".join(f"- {r.model} on {r.device_name}: {r.boundary}" for r in found.itertuples())
