"""The transformer_training study (notebook 50): DDP against FSDP2 against activation
checkpointing for one language model, tokens/s, MFU and peak memory side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis import repeat_spread
from benchlib.analysis.common import ok_runs, shared_cores_caveat
from benchlib.analysis.sides import compare, side

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

NOTEBOOK = "50_transformer_training.ipynb"
# the same work: one model on the same data and per-device batch, on the same hardware
SAME_WORK = ["table", "model", "model_args", "seq_len", "batch_size", "precision", "hardware"]
CONFIG = ["strategy", "world_size", "ac", "compile"]
FLOP_TOLERANCE = 0.05  # the analytic and counted FLOPs per token agree within this


def runs(df: pd.DataFrame) -> pd.DataFrame:
    runs = ok_runs(df, NOTEBOOK, "ac", ("nproc_per_node", "batch_size", "world_size", "seq_len"))
    if runs.empty:
        return runs
    runs["compile"] = runs["compile"].astype(bool)
    runs["peak_mib"] = runs["peak_bytes"] / 2**20
    return runs


def table(runs: pd.DataFrame) -> pd.DataFrame:
    cols = [*CONFIG, "precision", "tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90",
            "tokens_per_s_per_device", "mfu", "peak_mib", "peak_kind", "param_bytes",
            "flops_per_token_analytic", "flops_per_token", "flop_count_ratio"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(CONFIG).round(3).reset_index(drop=True)


def _name(r: pd.Series) -> str:
    extra = [f"ac {r['ac']}" if r["ac"] != "none" else "", "compiled" if r["compile"] else ""]
    ranks = f" on {int(r['world_size'])} ranks" if r["strategy"] != "single" else ""
    return " ".join(filter(None, [f"{r['strategy']}{ranks}", *extra]))


def conclusions(runs: pd.DataFrame) -> str:
    """Per model and work: FSDP2 against DDP (same ranks, no checkpointing), each
    checkpointing mode against none (same strategy), with intervals (sides.compare)
    and the peak memory each saves; the FLOP counts' agreement; MFU where known."""
    if runs.empty:
        return "No transformer runs yet (notebook 50)."
    parts = []
    for key, group in runs.groupby(SAME_WORK, dropna=False):
        work = dict(zip(SAME_WORK, key))
        head = f"{work['model']}, seq {int(work['seq_len'])}, batch {int(work['batch_size'])}, " \
               f"{work['precision']}"
        plain = group[(group["ac"] == "none") & ~group["compile"]]
        for ranks, at in plain.groupby("world_size"):
            ddp, fsdp = at[at["strategy"] == "ddp"], at[at["strategy"] == "fsdp2"]
            if not ddp.empty and not fsdp.empty:
                text = compare(side(f"FSDP2 on {ranks} ranks", fsdp,
                                    within=repeat_spread.within(fsdp)),
                               side(f"DDP on {ranks} ranks", ddp, within=repeat_spread.within(ddp)))
                memory = fsdp["peak_mib"].median() / ddp["peak_mib"].median()
                parts.append(f"- {head}: tokens/s {text}; FSDP2's peak memory is "
                             f"{memory:.2f}x DDP's.")
        for (strategy, ranks), at in group[~group["compile"]].groupby(["strategy", "world_size"]):
            none = at[at["ac"] == "none"]
            for mode, saved in at[at["ac"] != "none"].groupby("ac"):
                if none.empty:
                    continue
                text = compare(side(f"ac {mode}", saved, within=repeat_spread.within(saved)),
                               side("no checkpointing", none, within=repeat_spread.within(none)))
                memory = saved["peak_mib"].median() / none["peak_mib"].median()
                parts.append(f"- {head}, {strategy} on {int(ranks)} rank(s): tokens/s {text}; "
                             f"peak memory {memory:.2f}x without checkpointing.")
    ratios = runs["flop_count_ratio"].dropna()
    if len(ratios):
        worst = (ratios - 1).abs().max()
        agree = "agree" if worst <= FLOP_TOLERANCE else "DISAGREE"
        parts.append(f"- FLOPs per token: the analytic count (6N + 12·L·H·Q·T) and PyTorch's "
                     f"counter {agree} within {worst:.1%} (tolerance {FLOP_TOLERANCE:.0%}) over "
                     f"{len(ratios)} run(s).")
    mfu = runs["mfu"].dropna() if "mfu" in runs else pd.Series(dtype=float)
    if len(mfu):
        best = runs.loc[mfu.idxmax()]
        parts.append(f"- Best MFU {best['mfu']:.1%}: {_name(best)} ({best['mfu_peak_source']}).")
    else:
        parts.append("- MFU is unknown here: no published peak for this device and precision "
                     "(a CPU has none); tokens/s stands on its own.")
    caveat = shared_cores_caveat(runs)
    if caveat:
        parts.append(f"- {caveat}")
    return "\n".join(parts)


def plot(runs: pd.DataFrame):
    """tokens/s (p10-p90) and peak memory per configuration, side by side."""
    import matplotlib.pyplot as plt

    shown = runs.sort_values(CONFIG)
    names = [_name(r) for _, r in shown.iterrows()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.5 * len(names) + 1.8), sharey=True)
    err = [shown["tokens_per_s"] - shown["tokens_per_s_p10"],
           shown["tokens_per_s_p90"] - shown["tokens_per_s"]]
    left.barh(names, shown["tokens_per_s"], xerr=err, color="#4c72b0")
    left.set(xlabel="tokens/s (global; bars p10-p90)", ylabel="configuration",
             title="Throughput")
    right.barh(names, shown["peak_mib"], color="#dd8452")
    right.set(xlabel=f"peak memory per rank (MiB, {shown['peak_kind'].iloc[0]})",
              title="Peak memory")
    fig.tight_layout()
    return fig


def part_table(records: Records) -> pd.DataFrame:
    return table(runs(records.df))


def part_plot_and_conclusions(records: Records):
    lm = runs(records.df)
    if not lm.empty:
        yield plot(lm)
    yield conclusions(lm)
