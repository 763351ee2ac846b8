"""The scaling_projection study (notebook 45): the projection's inputs resolved from a config
(numbers, records, or seed 003's tables), its curves with what-ifs, which term sets the step,
the check against seed 003, and the sentences notebook 90 shows.

The model itself is benchlib.analysis.projection; the check, projection_check. Every input
keeps where it came from; one that cannot be found raises UsageError naming it and how to
measure it, never a guess.
"""

from __future__ import annotations

import math

import pandas as pd

from benchlib import reference
from benchlib.analysis import projection_check
from benchlib.analysis.projection import (HOW, MODEL_PARAMS, Inputs, default_sizes, project,
                                          what_if)
from benchlib.config import ScalingProjectionConfig
from benchlib.config.scaling_projection import input_form
from benchlib.errors import UsageError

NOTEBOOK = "45_scaling_projection.ipynb"
COMPUTE_NOTEBOOKS = ("40_framework_comparison.ipynb", "20_dp_vs_ddp.ipynb")
IO_NOTEBOOK = "10_single_device_io.ipynb"
MEASURE = {  # how to measure an input the records lack
    "compute": "run notebook 40 (or 20, strategy single) on one device, or give samples/s",
    "intra_busbw": "run notebook 20 with allreduce: true on one node, or give GB/s",
    "inter_busbw": "run the all-reduce study across two nodes, or give GB/s",
    "input_ceiling": "run notebook 10 in traverse mode with the training's num_workers, "
                     "give samples/s, or none for synthetic data",
}


# ---------------------------------------------------------------- inputs from records

def _ok(records: pd.DataFrame) -> pd.DataFrame:
    return records[records["status"] == "ok"] if not records.empty else records


def _compute_candidates(records: pd.DataFrame) -> pd.DataFrame:
    """One-device fp32 training records (notebook 40, else 20's single rows), best first:
    notebook 40 on synthetic data (compute only), then the newest."""
    ok = _ok(records)
    if ok.empty or "world_size" not in ok:
        return ok
    ok = ok[ok["notebook"].isin(COMPUTE_NOTEBOOKS) & (ok["world_size"] == 1)
            & ok["samples_per_s"].notna()]
    for col, unwanted in (("strategy", "dp"), ("channels_last", True), ("compile", True)):
        if col in ok:
            ok = ok[ok[col] != unwanted]
    if "precision" in ok:
        ok = ok[ok["precision"].isna() | (ok["precision"] == "fp32")]
    synthetic = ok["dataset"].eq("synthetic") & ok["notebook"].eq(COMPUTE_NOTEBOOKS[0])
    return ok.assign(_synthetic=synthetic).sort_values(["_synthetic", "started_at"],
                                                       ascending=False)


def _candidates(name: str, records: pd.DataFrame) -> pd.DataFrame:
    """The records that measure input `name`, newest first."""
    if name == "compute":
        return _compute_candidates(records)
    ok = _ok(records)
    column = "busbw_gbps" if name.endswith("busbw") else "samples_per_s"
    if ok.empty or column not in ok:
        return ok.iloc[0:0]
    ok = ok[ok[column].notna()]
    if name == "input_ceiling":
        mode = ok["mode"] if "mode" in ok else pd.Series(None, index=ok.index)
        ok = ok[(ok["notebook"] == IO_NOTEBOOK) & (mode == "traverse")]
    return ok.sort_values("started_at", ascending=False)


def record_for(name: str, value: str, records: pd.DataFrame) -> pd.Series:
    """The record input `name` is read from: run id `value`, or the best `newest` one."""
    found = _candidates(name, records)
    if value != "newest":
        found = found[found["run_id"] == value] if not found.empty else found
    if found.empty:
        what = f"no record {value} that measures it" if value != "newest" else \
            "no record that measures it"
        raise UsageError(f"{name}: {what} under the results folder; {MEASURE[name]}")
    return found.iloc[0]


def _label(rec: pd.Series) -> str:
    what = rec.get("arch") if isinstance(rec.get("arch"), str) else rec.get("model")
    return f"run {rec['run_id']} ({rec['notebook'].removesuffix('.ipynb')}, {what}, " \
           f"{rec.get('device_name') or rec.get('device')})"


def _dlperf(cfg: ScalingProjectionConfig) -> tuple[projection_check.NodeFit, float | None]:
    fits = projection_check.fit_dlperf(reference.dlperf())
    fit = next((f for f in fits if (f.framework, f.batch_size) == (cfg.framework, cfg.batch_size)),
               None)
    if fit is None:
        raise UsageError(f"compute: seed 003 has no four 1-node rows of {cfg.framework} at batch "
                         f"{cfg.batch_size}; pick another framework or batch_size, or give numbers")
    return fit, projection_check.framework_caps(fits).get(cfg.framework)


def _from_dlperf(name: str, cfg: ScalingProjectionConfig) -> tuple[float, str]:
    fit, cap = _dlperf(cfg)
    where = f"seed 003 {cfg.framework} batch {cfg.batch_size}"
    if name == "compute":
        return cfg.batch_size / fit.compute_s, f"1-GPU row of {where}"
    if name == "intra_busbw":
        return fit.intra_busbw_gbps, f"fitted to the 1-node rows of {where}"
    if cap is None:
        return math.inf, f"no node cap shows in the 1-node rows of {where}"
    return cap, f"node cap of seed 003 {cfg.framework}'s 1-node rows (median over batch sizes)"


def resolve(name: str, cfg: ScalingProjectionConfig, records: pd.DataFrame,
            ) -> tuple[float, str, pd.Series | None]:
    """(value, source, record or None) of a text input: compute in samples/s, busbw in GB/s,
    input ceiling in samples/s (inf: none)."""
    value = getattr(cfg, name)
    form = input_form(value)
    if form == "number":
        return float(value), "given", None
    if form == "none":
        return math.inf, "declared unlimited (synthetic data)", None
    if form == "dlperf":
        return (*_from_dlperf(name, cfg), None)
    rec = record_for(name, value, records)
    column = "busbw_gbps" if name.endswith("busbw") else "samples_per_s"
    return float(rec[column]), _label(rec), rec


def _grad_bytes(cfg: ScalingProjectionConfig, rec: pd.Series | None) -> tuple[float, str]:
    if rec is not None and pd.notna(rec.get("model_params")):
        return 4.0 * rec["model_params"], f"{int(rec['model_params']):,} parameters x 4 bytes " \
                                          f"({_label(rec)})"
    if cfg.model not in MODEL_PARAMS:
        raise UsageError(f"grad_bytes: unknown model {cfg.model!r} (known: "
                         f"{', '.join(MODEL_PARAMS)}); give compute as the model's one-device "
                         "record (notebook 40 keeps its model_params), or a known model")
    n = MODEL_PARAMS[cfg.model]
    return 4.0 * n, f"{cfg.model}: {n:,} parameters x 4 bytes (fp32 gradients)"


def build_inputs(cfg: ScalingProjectionConfig, records: pd.DataFrame) -> Inputs:
    """The model's inputs from `cfg`, each with its source."""
    samples, compute_src, rec = resolve("compute", cfg, records)
    batch = int(rec["batch_size"]) if rec is not None else cfg.batch_size
    grad, grad_src = _grad_bytes(cfg, rec)
    intra, intra_src, _ = resolve("intra_busbw", cfg, records)
    inter, inter_src, _ = resolve("inter_busbw", cfg, records)
    ceiling, ceiling_src, _ = resolve("input_ceiling", cfg, records)
    threads = None
    if cfg.host_cores:
        if rec is None or pd.isna(rec.get("threads_per_rank")):
            raise UsageError(f"compute_threads: missing; {HOW['compute_threads']} (give compute "
                             "as a run id or newest)")
        threads = int(rec["threads_per_rank"])
    return Inputs(compute_s=batch / samples, batch_size=batch, grad_bytes=grad,
                  devices_per_node=cfg.devices_per_node, input_ceiling=ceiling,
                  intra_busbw_gbps=intra, inter_busbw_gbps=inter,
                  host_cores=cfg.host_cores or None, compute_threads=threads,
                  sources={"compute_s": compute_src, "batch_size": compute_src if rec is not None
                           else "given", "grad_bytes": grad_src, "intra_busbw_gbps": intra_src,
                           "inter_busbw_gbps": inter_src, "input_ceiling": ceiling_src,
                           "overlap": "default: nothing hidden",
                           "bucket_bytes": "default: DDP's bucket_cap_mb, 25 MiB",
                           "compute_threads": compute_src if threads else "-",
                           "host_cores": "given" if cfg.host_cores else "-"})


def sizes(cfg: ScalingProjectionConfig) -> list[tuple[int, int]]:
    nodes = [int(n) for n in cfg.nodes.split(",")] if cfg.nodes else None
    return default_sizes(cfg.devices_per_node, nodes)


# ---------------------------------------------------------------- curves and sentences

def curves(inp: Inputs, at: list[tuple[int, int]], what_ifs: list[str]) -> pd.DataFrame:
    """The projection and each what-if (NAME=VALUE), one frame with a `case` column ("as
    given" first)."""
    cases = [("as given", inp)] + [(f"what if {spec}", what_if(inp, spec)) for spec in what_ifs]
    return pd.concat([project(i, at).assign(case=name) for name, i in cases], ignore_index=True)


def terms_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per size: samples/s, speedup, efficiency, each term of the step in ms, the dominant."""
    return pd.DataFrame({
        "devices": df["devices"], "nodes": df["nodes"], "samples_per_s": df["samples_per_s"].round(1),
        "speedup": df["speedup"].round(2), "efficiency_%": (100 * df["efficiency"]).round(1),
        "compute_ms": (1e3 * df["compute_s"]).round(1), "comm_ms": (1e3 * df["comm_s"]).round(1),
        "input_ms": (1e3 * df["input_s"]).round(1), "step_ms": (1e3 * df["step_s"]).round(1),
        "dominant": df["dominant"]})


def where_scaling_stops(df: pd.DataFrame) -> dict:
    """The largest size still set by compute, the first set by another term, and the
    efficiency there and at the largest size."""
    df = df.reset_index(drop=True)
    other = list(df.index[df["dominant"] != "compute"])
    first = df.loc[other[0]] if other else None
    if first is None:
        compute_up_to = int(df["devices"].iloc[-1])
    else:
        compute_up_to = int(df.loc[other[0] - 1, "devices"]) if other[0] else None
    return {"compute_up_to": compute_up_to,
            "stops_at": None if first is None else int(first["devices"]),
            "stops_by": None if first is None else first["dominant"],
            "efficiency_there": None if first is None else float(first["efficiency"]),
            "largest": int(df["devices"].iloc[-1]),
            "efficiency_largest": float(df["efficiency"].iloc[-1])}


def stops_sentence(df: pd.DataFrame, what: str) -> str:
    """Where compute stops setting the step, by what, and the efficiency there and at the end."""
    s = where_scaling_stops(df)
    at_end = f"{s['efficiency_largest']:.0%} efficiency at {s['largest']:,} devices"
    if s["stops_at"] is None:
        return f"{what}: compute sets the step at every size up to {s['largest']:,} devices ({at_end})."
    lead = "from 1 device" if s["compute_up_to"] is None else \
        f"compute sets the step up to {s['compute_up_to']} device(s); from {s['stops_at']}"
    there = f"{s['efficiency_there']:.0%} efficiency there"
    same = round(100 * s["efficiency_there"]) == round(100 * s["efficiency_largest"])
    tail = f"{there} and at {s['largest']:,} devices" if same else f"{there}, {at_end}"
    return f"{what}: {lead}, **{s['stops_by']}** does ({tail})."


def check_sentence(table: pd.DataFrame) -> str:
    worst = table.loc[table["error_%"].abs().idxmax()]
    return (f"Fitted on seed 003's 1-node rows only, the model predicts its {len(table)} "
            f"published 16- and 32-GPU cells with a median absolute error of "
            f"**{projection_check.median_abs_error(table):.1f}%** (worst: {worst['framework']} "
            f"batch {worst['batch']} on {worst['devices']} GPUs, {worst['error_%']:+.1f}%).")


def metrics(inp: Inputs, df: pd.DataFrame, check: pd.DataFrame) -> dict:
    """The notebook's record: where scaling stops and the check's median error."""
    s = where_scaling_stops(df)
    return {"samples_per_s_one": float(df["samples_per_s"].iloc[0]),
            "compute_up_to_devices": s["compute_up_to"], "stops_at_devices": s["stops_at"],
            "stops_by": s["stops_by"], "largest_devices": s["largest"],
            "efficiency_largest": s["efficiency_largest"],
            "check_median_abs_error_pct": projection_check.median_abs_error(check),
            "compute_source": inp.sources.get("compute_s")}


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 45."""
    if df.empty or "notebook" not in df:
        return pd.DataFrame()
    return df[(df["notebook"] == NOTEBOOK) & (df["status"] == "ok")]


def conclusions(runs: pd.DataFrame) -> str:
    """The check against seed 003 and seed 003 PyTorch's projection, computed now, then
    each notebook 45 run's own headline from its record."""
    cfg = ScalingProjectionConfig()
    inp = build_inputs(cfg, pd.DataFrame())
    lines = [check_sentence(projection_check.check_dlperf()),
             stops_sentence(project(inp, sizes(cfg)), f"Seed 003's PyTorch node (batch "
                            f"{cfg.batch_size}, {cfg.inter_busbw} GB/s between nodes)")]
    for _, r in runs.iterrows():
        where = "compute sets the step at every size" if pd.isna(r.get("stops_at_devices")) else \
            f"from {int(r['stops_at_devices'])} devices, {r['stops_by']} sets the step"
        lines.append(f"Run {r['run_id']} (compute: {r['compute_source']}): {where}; "
                     f"{r['efficiency_largest']:.0%} efficiency at {int(r['largest_devices']):,} "
                     "devices.")
    return "\n\n".join(lines)


# ---------------------------------------------------------------- figures

def scaling_figure(curves: pd.DataFrame, title: str):
    """Samples/s and efficiency against devices, one line per case (log-log, log-linear)."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for case, group in curves.groupby("case", sort=False):
        style = "-" if case == "as given" else "--"
        left.plot(group["devices"], group["samples_per_s"], style, marker="o", ms=3, label=case)
        right.plot(group["devices"], 100 * group["efficiency"], style, marker="o", ms=3, label=case)
    one = curves[curves["case"] == "as given"]
    left.plot(one["devices"], one["devices"] * one["samples_per_s"].iloc[0], ":", color="grey",
              label="linear (as given)")
    left.set(xscale="log", yscale="log", xlabel="devices (log)", ylabel="samples/s (log)",
             title="Predicted throughput")
    right.set(xscale="log", xlabel="devices (log)", ylabel="efficiency (% of linear)",
              ylim=(0, 105), title="Predicted efficiency")
    left.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def terms_figure(df: pd.DataFrame, title: str):
    """Each term of the step against devices, in ms; the step is the largest of compute +
    communication and input, and the dominant term is written over each size."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for column, name in (("compute_s", "compute"), ("comm_s", "communication (not hidden)"),
                         ("input_s", "input (node's data path)"), ("step_s", "step")):
        ax.plot(df["devices"], 1e3 * df[column], marker="o", ms=3, label=name,
                linewidth=2.5 if column == "step_s" else 1.2)
    changes = df[df["dominant"] != df["dominant"].shift()]
    for _, row in changes.iterrows():  # where the dominant term changes, its name
        ax.annotate(f"{row['dominant']} from here", (row["devices"], 1e3 * row["step_s"]),
                    fontsize=8, textcoords="offset points", xytext=(0, 8),
                    ha="left" if row["devices"] == df["devices"].iloc[0] else "center")
    ax.set(xscale="log", yscale="log", xlabel="devices (log)", ylabel="ms per step (log)",
           title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def check_figure(table: pd.DataFrame):
    """Predicted against published samples/s for every checked cell of seed 003."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5.5))
    colors = dict(zip(sorted(table["framework"].unique()), plt.get_cmap("tab10").colors))
    for (framework, devices), group in table.groupby(["framework", "devices"]):
        ax.scatter(group["published"], group["predicted"], marker="o" if devices == 16 else "s",
                   color=colors[framework], label=f"{framework}, {devices} GPUs")
    low, high = 0.8 * table[["published", "predicted"]].min().min(), \
        1.2 * table[["published", "predicted"]].max().max()
    ax.plot([low, high], [low, high], color="grey", linestyle=":", label="exact")
    ax.fill_between([low, high], [0.9 * low, 0.9 * high], [1.1 * low, 1.1 * high], color="grey",
                    alpha=0.15, label="within 10%")
    ax.set(xscale="log", yscale="log", xlabel="published samples/s (log)",
           ylabel="predicted samples/s (log)", xlim=(low, high), ylim=(low, high),
           title="Seed 003: predicted from 1 node vs published\n(2 and 4 nodes of 8 V100s)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
