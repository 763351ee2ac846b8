"""The scaling projection's inputs (notebook 45, benchlib.analysis.scaling_projection): each
one resolved from the config as a number given, none (synthetic data), seed 003's 1-node fit,
or a record of this workbook (a run id, or the best `newest` one), and the model's Inputs
built from them with where each came from. An input that cannot be found raises UsageError
naming it and how to measure it, never a guess.
"""

from __future__ import annotations

import math

import pandas as pd

from benchlib import reference
from benchlib.config import ScalingProjectionConfig
from benchlib.config.performance import compiled
from benchlib.config.scaling_projection import input_form
from benchlib.errors import UsageError
from benchlib.projection import check_seed003
from benchlib.projection.scaling import HOW, MODEL_PARAMS, Inputs, default_sizes

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


def _model(records: pd.DataFrame) -> pd.Series:
    """Each record's model (`arch` in notebook 40's records from before it said model)."""
    model = records["model"] if "model" in records else pd.Series(None, index=records.index,
                                                                  dtype=object)
    return model.where(model.notna(), records["arch"]) if "arch" in records else model


def _compute_candidates(records: pd.DataFrame, model: str = "") -> pd.DataFrame:
    """One-device fp32 training records (notebook 40, else 20's single rows), best first:
    those of `model` (the one the projection is of), then notebook 40 on synthetic data
    (compute only), then the newest."""
    ok = _ok(records)
    if ok.empty or "world_size" not in ok:
        return ok
    ok = ok[ok["notebook"].isin(COMPUTE_NOTEBOOKS) & (ok["world_size"] == 1)
            & ok["samples_per_s"].notna()]
    for col, unwanted in (("strategy", "dp"), ("channels_last", True)):
        if col in ok:
            ok = ok[ok[col] != unwanted]
    if "compile" in ok:  # eager: a compiled row in any mode (an old record's true) is not
        ok = ok[~ok["compile"].map(compiled)]
    if "precision" in ok:
        ok = ok[ok["precision"].isna() | (ok["precision"] == "fp32")]
    synthetic = ok["dataset"].eq("synthetic") & ok["notebook"].eq(COMPUTE_NOTEBOOKS[0])
    return ok.assign(_model=_model(ok).eq(model), _synthetic=synthetic).sort_values(
        ["_model", "_synthetic", "started_at"], ascending=False)


def _candidates(name: str, records: pd.DataFrame, model: str = "") -> pd.DataFrame:
    """The records that measure input `name`, best first (compute: of `model` first)."""
    if name == "compute":
        return _compute_candidates(records, model)
    ok = _ok(records)
    column = "busbw_gbps" if name.endswith("busbw") else "samples_per_s"
    if ok.empty or column not in ok:
        return ok.iloc[0:0]
    ok = ok[ok[column].notna()]
    if name == "input_ceiling":
        mode = ok["mode"] if "mode" in ok else pd.Series(None, index=ok.index)
        ok = ok[(ok["notebook"] == IO_NOTEBOOK) & (mode == "traverse")]
    return ok.sort_values("started_at", ascending=False)


def record_for(name: str, value: str, records: pd.DataFrame, model: str = "") -> pd.Series:
    """The record input `name` is read from: run id `value`, or the best `newest` one
    (compute: the newest of `model`, where there is one)."""
    found = _candidates(name, records, model)
    if value != "newest":
        found = found[found["run_id"] == value] if not found.empty else found
    if found.empty:
        what = f"no record {value} that measures it" if value != "newest" else \
            "no record that measures it"
        raise UsageError(f"{name}: {what} under the results folder; {MEASURE[name]}")
    return found.iloc[0]


def _label(rec: pd.Series) -> str:
    """'run X (40_framework_comparison: resnet18 on synthetic, batch 8, on cpu)': the record
    an input came from and the work it measured (what it lacks is left out)."""
    what = rec.get("arch") if isinstance(rec.get("arch"), str) else rec.get("model")
    batch = rec.get("batch_size")
    device = next((d for d in (rec.get("device_name"), rec.get("device")) if isinstance(d, str)),
                  None)
    work = [" on ".join(v for v in (what, rec.get("dataset")) if isinstance(v, str)),
            f"batch {int(batch)}" if pd.notna(batch) else "", f"on {device}" if device else ""]
    return f"run {rec['run_id']} ({rec['notebook'].removesuffix('.ipynb')}: " \
           f"{', '.join(w for w in work if w)})"


def _dlperf(cfg: ScalingProjectionConfig) -> tuple[check_seed003.NodeFit, float | None]:
    fits = check_seed003.fit_dlperf(reference.dlperf())
    fit = next((f for f in fits if (f.framework, f.batch_size) == (cfg.framework, cfg.batch_size)),
               None)
    if fit is None:
        raise UsageError(f"compute: seed 003 has no four 1-node rows of {cfg.framework} at batch "
                         f"{cfg.batch_size}; pick another framework or batch_size, or give numbers")
    return fit, check_seed003.framework_caps(fits).get(cfg.framework)


def _from_dlperf(name: str, cfg: ScalingProjectionConfig) -> tuple[float, str]:
    fit, cap = _dlperf(cfg)
    where = f"seed 003 {cfg.framework} batch {cfg.batch_size}"
    if name == "compute":  # seed 003's script trains on ImageNet's JPEGs (docs/projection.md)
        return cfg.batch_size / fit.compute_s, (f"1-GPU row of seed 003 {cfg.framework}: "
                                                f"ResNet-50 v1.5 on ImageNet, batch "
                                                f"{cfg.batch_size}, on a V100 16G")
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
    rec = record_for(name, value, records, cfg.model)
    column = "busbw_gbps" if name.endswith("busbw") else "samples_per_s"
    label = _label(rec)
    if name == "compute" and _model(rec.to_frame().T).iloc[0] != cfg.model:
        label += f"; no record of {cfg.model}, so the projection is of this run's model"
    return float(rec[column]), label, rec


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


def measured_overlap(records: pd.DataFrame, rec: pd.Series | None) -> tuple[float, str]:
    """The share of DDP's all-reduce backward hid, as the newest DDP record measured it (its
    comm hook: benchlib.distributed.comm_timer), on the compute record's hardware where
    there is one; else 0, the upper bound of communication, saying so."""
    if records.empty or "comm_hidden_fraction" not in records:
        return 0.0, "default: nothing hidden (no DDP record measured it)"
    measured = records[(records["status"] == "ok") & records["comm_hidden_fraction"].notna()]
    if rec is not None and "hardware" in measured:
        same = measured[measured["hardware"] == rec.get("hardware")]
        measured = same if not same.empty else measured
    if measured.empty:
        return 0.0, "default: nothing hidden (no DDP record measured it)"
    newest = measured.sort_values("finished_at").iloc[-1]
    share = float(newest["comm_hidden_fraction"])
    return share, (f"measured: backward hid {share:.0%} of the all-reduce "
                   f"({int(newest['world_size'])} ranks, {_label(newest)})")


def build_inputs(cfg: ScalingProjectionConfig, records: pd.DataFrame) -> Inputs:
    """The model's inputs from `cfg`, each with its source."""
    samples, compute_src, rec = resolve("compute", cfg, records)
    batch = int(rec["batch_size"]) if rec is not None else cfg.batch_size
    grad, grad_src = _grad_bytes(cfg, rec)
    intra, intra_src, _ = resolve("intra_busbw", cfg, records)
    inter, inter_src, _ = resolve("inter_busbw", cfg, records)
    ceiling, ceiling_src, _ = resolve("input_ceiling", cfg, records)
    overlap, overlap_src = measured_overlap(records, rec)
    threads = None
    if cfg.host_cores:
        if rec is None or pd.isna(rec.get("threads_per_rank")):
            raise UsageError(f"compute_threads: missing; {HOW['compute_threads']} (give compute "
                             "as a run id or newest)")
        threads = int(rec["threads_per_rank"])
    return Inputs(compute_s=batch / samples, batch_size=batch, grad_bytes=grad,
                  devices_per_node=cfg.devices_per_node, input_ceiling=ceiling,
                  intra_busbw_gbps=intra, inter_busbw_gbps=inter,
                  host_cores=cfg.host_cores or None, compute_threads=threads, overlap=overlap,
                  sources={"compute_s": compute_src, "batch_size": compute_src if rec is not None
                           else "given", "grad_bytes": grad_src, "intra_busbw_gbps": intra_src,
                           "inter_busbw_gbps": inter_src, "input_ceiling": ceiling_src,
                           "overlap": overlap_src,
                           "bucket_bytes": "default: DDP's bucket_cap_mb, 25 MiB",
                           "compute_threads": compute_src if threads else "-",
                           "host_cores": "given" if cfg.host_cores else "-"})


def sizes(cfg: ScalingProjectionConfig) -> list[tuple[int, int]]:
    nodes = [int(n) for n in cfg.nodes.split(",")] if cfg.nodes else None
    return default_sizes(cfg.devices_per_node, nodes)
