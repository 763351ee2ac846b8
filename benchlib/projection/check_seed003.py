"""The projection checked against published multi-node tables: each framework and batch
size is fitted on its 1-node rows (1, 2, 4, 8 GPUs) only, then its 2-node (16 GPUs) and
4-node (32 GPUs) rows are predicted with `scaling.project`.

Fitted from the 1-node rows, per framework and batch size:
  compute_s         batch / samples/s of the 1-GPU row
  intra_busbw_gbps  the effective busbw for which compute_s + 2(n-1)/n x grad_bytes / busbw
                    fits the 2- and 4-GPU step times (least squares, over those of the two
                    that were published; the 8-GPU row too unless it shows a cap). It takes
                    in every loss of a node, not only the all-reduce, so it is lower than
                    NVLink's.
  cap               when the 8-GPU row falls more than CAP_TOLERANCE short of that law,
                    the node is capped there: by its input pipeline or, for PyTorch's
                    single-process DataParallel rows, by that process (these rows cannot
                    tell which). A cap is samples/s of a node, not of a batch size, so a
                    framework's cap is the CAP_AGGREGATE (median) of its batch sizes' caps
                    and holds for all of them.
Given once for all frameworks: INTER_BUSBW_GBPS between nodes (why: docs/projection.md),
nothing of the all-reduce hidden (overlap 0), ResNet-50's fp32 gradient size.

The design is frozen here, with its metric and target, before anything is scored. It was
chosen on seed 003's table, so the score on that table is in-sample (optimistic); the
leave-one-framework-out loop re-makes the tuned choices without the framework it scores,
and DLPerf's per-framework pages (benchlib/reference/dlperf_pages_resnet50.csv), never
used in the design, are the out-of-sample set. Every score is printed beside a naive
baseline: nodes x the 8-GPU row.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from benchlib import reference
from benchlib.core.intervals import cluster_median_interval, paired_median_difference
from benchlib.core.stats import median_abs_error
from benchlib.projection.scaling import MODEL_PARAMS, Inputs, project

# ---- the frozen design: set before scoring, not to be tuned on any printed score
INTER_BUSBW_GBPS = 10.0  # one 4X EDR InfiniBand port per node (100 Gb/s = 12.5 GB/s) at 80%
CAP_TOLERANCE = 0.10  # shortfalls below this are within the tables' run-to-run spread
CAP_AGGREGATE = "median"  # a framework's node cap: this statistic of its batch sizes' caps
TARGET_PCT = 10.0  # the target for the metric below
METRIC = "median absolute % error over the predicted 16- and 32-GPU cells"
# ---- the choices that were tuned on seed 003, re-made inside leave-one-framework-out
CAP_AGGREGATES = {"median": np.median, "mean": np.mean, "max": np.max}
INTER_BUSBW_GRID_GBPS = (10.0, 5.0, 12.5, 20.0)  # the frozen value first: ties keep it
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0

DEVICES_PER_NODE = 8
GRAD_BYTES = 4.0 * MODEL_PARAMS["resnet50"]
SOURCE = "seed 003 (DLPerf ResNet-50 v1.5 tables, Aug 2020)"
PAGES_SOURCE = ("DLPerf's per-framework ResNet-50 pages (Oneflow-Inc/DLPerf, FP32, batch 128, "
                "same V100 cluster, Sep 2020-Feb 2021)")


def ring_units(devices: int) -> float:
    return 2 * (devices - 1) / devices


def fit_overhead_s(compute_s: float, batch: int, rows: Mapping[int, float]) -> float:
    """Seconds per ring unit (grad_bytes / busbw) that best fit these rows' step times."""
    units = np.array([ring_units(n) for n in rows])
    extra = np.array([n * batch / x - compute_s for n, x in rows.items()])
    return max(0.0, float(units @ extra / (units @ units)))


@dataclasses.dataclass(frozen=True)
class NodeFit:
    framework: str
    batch_size: int
    compute_s: float
    intra_busbw_gbps: float  # math.inf: no loss measurable on one node
    cap: float | None  # samples/s of the node at this batch size, when one shows
    node_samples_per_s: float = math.nan  # the published 8-GPU row (the naive baseline's)


def fit_node(framework: str, batch: int, rows: Mapping[int, float]) -> NodeFit:
    """Fit one framework and batch size from its 1- and 8-GPU samples/s and whichever of
    the 2- and 4-GPU rows were published."""
    compute_s = batch / rows[1]
    middle = {n: rows[n] for n in (2, 4) if n in rows}
    per_unit = fit_overhead_s(compute_s, batch, middle)
    law8 = 8 * batch / (compute_s + ring_units(8) * per_unit)
    cap = rows[8] if rows[8] < (1 - CAP_TOLERANCE) * law8 else None
    if cap is None:
        per_unit = fit_overhead_s(compute_s, batch, {**middle, 8: rows[8]})
    busbw = GRAD_BYTES / per_unit / 1e9 if per_unit > 0 else math.inf
    return NodeFit(framework, batch, compute_s, busbw, cap, rows[8])


def fit_dlperf(df: pd.DataFrame) -> list[NodeFit]:
    """A fit for every framework and batch size with a 1-GPU, an 8-GPU and a 2- or 4-GPU
    row published (seed 003 publishes all four wherever it publishes any)."""
    fits = []
    for (framework, batch), group in df[df["nodes"] == 1].groupby(["framework", "batch_size"]):
        rows = group.set_index("devices")["samples_per_s"].dropna()
        if {1, 8} <= set(rows.index) and {2, 4} & set(rows.index):
            fits.append(fit_node(framework, int(batch), rows.to_dict()))
    return fits


def duplicate_batches(df: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(framework, batch, same_as): a batch size whose published samples/s equal a smaller
    batch size's of the same framework at every device count (the same run printed twice;
    seed 003's OneFlow 160 repeats 128). Such cells carry no information of their own."""
    wide = df.set_index(["framework", "batch_size", "devices"])["samples_per_s"].unstack()
    found = []
    for framework, table in wide.groupby(level="framework"):
        kept: list[tuple[int, pd.Series]] = []
        for (_, batch), row in table.sort_index().iterrows():
            same = next((b for b, r in kept if row.notna().any()
                         and row.isna().equals(r.isna()) and (row == r).sum() == row.notna().sum()), None)
            if same is None:
                kept.append((batch, row))
            else:
                found.append((framework, int(batch), int(same)))
    return found


def drop_duplicates(df: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, int, int]]]:
    dups = duplicate_batches(df)
    gone = pd.Series(list(zip(df["framework"], df["batch_size"]))).isin([(f, b) for f, b, _ in dups])
    return df[~gone.to_numpy()], dups


def framework_caps(fits: list[NodeFit], aggregate: str = CAP_AGGREGATE) -> dict[str, float]:
    """Each framework's node cap: the median (or `aggregate`) of its batch sizes' caps."""
    caps: dict[str, list[float]] = {}
    for fit in fits:
        if fit.cap is not None:
            caps.setdefault(fit.framework, []).append(fit.cap)
    return {fw: float(CAP_AGGREGATES[aggregate](values)) for fw, values in caps.items()}


def node_inputs(fit: NodeFit, cap: float | None, inter_busbw_gbps: float,
                source: str = SOURCE) -> Inputs:
    one_node = f"fit to the 1-node rows of {source}"
    return Inputs(
        compute_s=fit.compute_s, batch_size=fit.batch_size, grad_bytes=GRAD_BYTES,
        devices_per_node=DEVICES_PER_NODE, intra_busbw_gbps=fit.intra_busbw_gbps,
        inter_busbw_gbps=inter_busbw_gbps, overlap=0.0,
        input_ceiling=math.inf if cap is None else cap,
        sources={"compute_s": f"1-GPU row of {source}", "intra_busbw_gbps": one_node,
                 "input_ceiling": one_node if cap else f"none shows in the 1-node rows of {source}",
                 "grad_bytes": "resnet50: 25,557,032 parameters x 4 bytes",
                 "inter_busbw_gbps": "given: 4X EDR InfiniBand, 12.5 GB/s line rate, at 80%",
                 "overlap": "given: nothing hidden"})


def naive(fit: NodeFit, nodes: int) -> float:
    """The baseline any model must beat: nodes x the published 8-GPU row."""
    return nodes * fit.node_samples_per_s


def predict_cells(df: pd.DataFrame, inter_busbw_gbps: float = INTER_BUSBW_GBPS,
                  aggregate: str = CAP_AGGREGATE, pooled: bool = True,
                  source: str = SOURCE) -> pd.DataFrame:
    """One row per published 16- and 32-GPU cell of `df`: published, predicted from the
    1-node rows, naive, and the error % of each. pooled=False gives each batch size its
    own cap (a sensitivity check, not the model)."""
    fits = fit_dlperf(df)
    caps = framework_caps(fits, aggregate)
    published = df[(df["nodes"] > 1) & df["samples_per_s"].notna()].set_index(
        ["framework", "batch_size", "devices"])["samples_per_s"]
    rows = []
    for fit in fits:
        inp = node_inputs(fit, caps.get(fit.framework) if pooled else fit.cap,
                          inter_busbw_gbps, source)
        for nodes in (2, 4):
            key = (fit.framework, fit.batch_size, DEVICES_PER_NODE * nodes)
            if key not in published.index:
                continue  # OOM or TODO in the seed: nothing to compare with
            point = project(inp, [(key[2], nodes)]).iloc[0]
            rows.append({"framework": key[0], "batch": key[1], "devices": key[2],
                         "published": published[key], "predicted": point["samples_per_s"],
                         "naive": naive(fit, nodes), "dominant": point["dominant"]})
    table = pd.DataFrame(rows)
    table["error_%"] = 100 * (table["predicted"] / table["published"] - 1)
    table["naive_error_%"] = 100 * (table["naive"] / table["published"] - 1)
    return table


def check_dlperf(inter_busbw_gbps: float = INTER_BUSBW_GBPS, pooled: bool = True,
                 aggregate: str = CAP_AGGREGATE) -> pd.DataFrame:
    """Seed 003's 16- and 32-GPU cells predicted by the frozen model, duplicates dropped."""
    df, _ = drop_duplicates(reference.dlperf())
    return predict_cells(df, inter_busbw_gbps, aggregate, pooled)


def fits(table: pd.DataFrame, column: str = "error_%") -> list:
    """The cells' `column` per framework x batch fit: a fit's 16- and 32-GPU cells share
    it, so they are not independent, and a bootstrap resamples them together
    (core.intervals.cluster_median_interval)."""
    return [g[column].to_numpy() for _, g in table.groupby(["framework", "batch"])]


def error_interval(table: pd.DataFrame, column: str = "error_%") -> tuple[float, float]:
    """95% interval of the cells' median absolute error (`column`), whole fits resampled."""
    return cluster_median_interval(fits(table, column), BOOTSTRAP_DRAWS, BOOTSTRAP_SEED)


def paired_difference(table: pd.DataFrame, seed: int = BOOTSTRAP_SEED):
    """(model's median absolute error less naive's, and its 95% interval, a Boot) in
    percentage points, by a paired bootstrap over the fits
    (core.intervals.paired_median_difference). Below 0: the model is better."""
    pairs = list(zip(fits(table), fits(table, "naive_error_%")))
    boot = paired_median_difference(pairs, BOOTSTRAP_DRAWS, seed)
    diff = median_abs_error(table["error_%"]) - median_abs_error(table["naive_error_%"])
    return diff, boot


def beats_naive(table: pd.DataFrame, seed: int = BOOTSTRAP_SEED) -> str:
    """Whether the model beats the naive baseline on these cells: only where the paired
    95% interval of the difference excludes 0 beyond its Monte-Carlo error, else "not
    distinguishable" (and "at the boundary" where no number of draws settled it)."""
    diff, boot = paired_difference(table, seed)
    ci = (f"difference {diff:+.1f} points, paired 95% CI {boot.low:+.2f} to {boot.high:+.2f}, "
          f"{boot.text()}")
    if boot.at_boundary:
        return f"model beats naive: not distinguishable on these cells ({ci})"
    if boot.high < 0:
        return f"model beats naive: yes ({ci})"
    if boot.low > 0:
        return f"model beats naive: no, naive is better ({ci})"
    return f"model beats naive: not distinguishable on these cells ({ci}, which reaches 0)"


def leave_one_framework_out(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell, predicted with the cap aggregate and inter-node busbw that score best
    (the metric) on the *other* frameworks' cells; the held-out framework's published
    multi-node rows never enter its choice. Ties keep the frozen design."""
    grid = [(a, bw) for a in CAP_AGGREGATES for bw in INTER_BUSBW_GRID_GBPS]
    tables = {choice: predict_cells(df, choice[1], choice[0]) for choice in grid}
    held = []
    for framework in sorted(tables[grid[0]]["framework"].unique()):
        def others_error(choice, framework=framework):
            t = tables[choice]
            return median_abs_error(t.loc[t["framework"] != framework, "error_%"])
        choice = min(grid, key=others_error)
        t = tables[choice]
        held.append(t[t["framework"] == framework].assign(cap_aggregate=choice[0],
                                                          inter_busbw_gbps=choice[1]))
    return pd.concat(held, ignore_index=True)


def out_of_sample(inter_busbw_gbps: float = INTER_BUSBW_GBPS) -> pd.DataFrame:
    """The frozen model on DLPerf's per-framework pages: one fit per published table
    (a setup: framework, data loader, workers), its 16- and 32-GPU rows predicted."""
    pages = reference.dlperf_pages()
    return predict_cells(pages.assign(framework=pages["setup"]), inter_busbw_gbps,
                         source=PAGES_SOURCE)


def by_framework(table: pd.DataFrame) -> pd.DataFrame:
    rows = [{"framework": fw, "cells": len(g), "model_%": round(median_abs_error(g["error_%"]), 1),
             "naive_%": round(median_abs_error(g["naive_error_%"]), 1),
             "model_worst_%": round(float(g["error_%"].abs().max()), 1)}
            for fw, g in table.groupby("framework")]
    return pd.DataFrame(rows)


def summary(name: str, table: pd.DataFrame) -> str:
    """One line: the metric for the model and the naive baseline, each with its cluster
    bootstrap interval, whether the model beats the baseline (by the paired interval of
    the difference), whether the target holds."""
    model, base = median_abs_error(table["error_%"]), median_abs_error(table["naive_error_%"])
    (m_low, m_high), (b_low, b_high) = (error_interval(table, c) for c in ("error_%", "naive_error_%"))
    return (f"{name}, {len(table)} cells: model {model:.1f}% (95% CI {m_low:.1f}-{m_high:.1f}%), "
            f"naive {base:.1f}% (95% CI {b_low:.1f}-{b_high:.1f}%); {beats_naive(table)}; "
            f"{TARGET_PCT:g}% target {'holds' if model <= TARGET_PCT else 'missed'}")


def format_fits(fits: list[NodeFit]) -> str:
    caps = framework_caps(fits)
    df = pd.DataFrame([{"framework": f.framework, "batch": f.batch_size,
                        "compute_ms": round(1e3 * f.compute_s, 1),
                        "eff_intra_gbps": round(f.intra_busbw_gbps, 2),
                        "cap_this_batch": round(f.cap, 1) if f.cap else "-",
                        "node_cap": round(caps[f.framework], 1) if f.framework in caps else "none"}
                       for f in fits])
    return df.to_string(index=False)


def format_cells(table: pd.DataFrame) -> str:
    return table.assign(published=table["published"].round(2),
                        predicted=table["predicted"].round(1), naive=table["naive"].round(1),
                        **{"error_%": table["error_%"].round(1),
                           "naive_error_%": table["naive_error_%"].round(1)}).to_string(index=False)


def report(inter_busbw_gbps: float = INTER_BUSBW_GBPS) -> str:
    """The frozen design first, then the fit, every cell beside the naive baseline, the
    scores per framework, and one line each: in-sample, leave-one-framework-out and
    out-of-sample."""
    df, dups = drop_duplicates(reference.dlperf())
    table = predict_cells(df, inter_busbw_gbps)
    lofo = leave_one_framework_out(df)
    outside = out_of_sample(inter_busbw_gbps)
    choices = lofo.groupby("framework")[["cap_aggregate", "inter_busbw_gbps"]].first()
    dropped = "; ".join(f"{f} batch {b} (samples/s identical to batch {s} at every device count)"
                        for f, b, s in dups) or "none"
    return "\n".join([
        f"design (frozen before scoring): ResNet-50 fp32 gradients, overlap 0, inter-node busbw "
        f"{inter_busbw_gbps:g} GB/s, cap tolerance {CAP_TOLERANCE:.0%}, node cap = "
        f"{CAP_AGGREGATE} of a framework's batch-size caps",
        f"metric: {METRIC}; target: {TARGET_PCT:g}%; baseline: naive = nodes x the 8-GPU row",
        "note: the cap aggregate and the busbw were chosen on seed 003's table itself, so its "
        "in-sample score is optimistic; leave-one-framework-out and out-of-sample are not",
        f"dropped as duplicates: {dropped}", "",
        f"fit on the 1-node rows of {SOURCE}",
        format_fits(fit_dlperf(df)), "",
        format_cells(table), "",
        "per framework (median absolute error %; in-sample):",
        by_framework(table).to_string(index=False), "",
        "leave-one-framework-out choices (made on the other frameworks' cells):",
        choices.to_string(), "",
        f"out-of-sample: {PAGES_SOURCE}, never used in the design",
        format_cells(outside), "",
        summary("seed 003 in-sample", table),
        summary("seed 003 leave-one-framework-out", lofo),
        summary("out-of-sample (DLPerf per-framework pages)", outside)])
