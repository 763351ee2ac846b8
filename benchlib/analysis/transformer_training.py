"""The transformer_training study (notebook 50): DDP against FSDP2 against activation
checkpointing for one language model, tokens/s, MFU and peak memory side by side; its
headline, main figure and notebook 90's section, all from `runs()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis import repeat_spread
from benchlib.analysis.claims import Claim, Figure, fmt, metric, rows, value
from benchlib.analysis.common import ok_runs, shared_cores_caveat, with_columns
from benchlib.analysis.sides import compare, side
from benchlib.config import studies
from benchlib.config.choices import FP8_RECIPES
from benchlib.config.performance import compile_mode

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Tokens/s, MFU and peak memory per configuration of one language model; FSDP2 "
         "against DDP on the same ranks and each checkpointing mode against none, with "
         "intervals, and whether the two FLOP counts agree.")
# the same work: one model on the same data and per-device batch, on the same hardware
SAME_WORK = ["table", "model", "model_args", "seq_len", "batch_size", "precision", "hardware"]
CONFIG = ["strategy", "world_size", "ac", "compile"]
FLOP_TOLERANCE = 0.05  # the analytic and counted FLOPs per token agree within this
# a float8 row's A/B against bf16 (studies/fp8.py)
FP8_COLUMNS = ["fp8", "fp8_filter", "fp8_converted", "fp8_kept", "fp8_speedup",
               "fp8_speedup_ci95_low", "fp8_speedup_ci95_high", "fp8_speedup_verdict",
               "fp8_loss_parity", "fp8_peak_mem_ratio", "mfu_fp8_weighted"]


def runs(df: pd.DataFrame) -> pd.DataFrame:
    runs = ok_runs(df, STUDY, ("nproc_per_node", "batch_size", "world_size", "seq_len"))
    if runs.empty:
        return runs
    # an emulated float8 run keeps no speed: its tokens/s and MFU are None, not missing
    runs = with_columns(runs, [*SAME_WORK, *CONFIG, "model_peak_bytes", "model_peak_kind",
                               "tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90", "mfu",
                               "mfu_peak_source", "samples_per_s"])
    runs["compile"] = runs["compile"].map(compile_mode)  # an old record's true: default
    runs["peak_mib"] = runs["peak_bytes"] / 2**20
    runs["model_mib"] = pd.to_numeric(runs["model_peak_bytes"], errors="coerce") / 2**20
    return runs


def memory_ratio(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """a's peak memory over b's, saying what was divided: the model's own bytes (the peak
    above what the process held before the model was built: on a CPU not the interpreter's
    0.7 GiB) where both sides have them, else the peak (`peak_kind`)."""
    def known(side: pd.DataFrame, column: str) -> bool:
        return column in side and len(side) > 0 and bool(side[column].notna().all())

    column, kind = ("model_mib", "model_peak_kind") if known(a, "model_mib") and \
        known(b, "model_mib") else ("peak_mib", "peak_kind")
    kinds = sorted({k for side in (a, b) if kind in side for k in side[kind].dropna()})
    what = ("the model's own bytes: " if column == "model_mib" else "") + \
        (", ".join(kinds) or "peak")
    return f"{a[column].median() / b[column].median():.2f}x ({what})"


def table(runs: pd.DataFrame) -> pd.DataFrame:
    cols = [*CONFIG, "precision", "tokens_per_s", "tokens_per_s_p10", "tokens_per_s_p90",
            "tokens_per_s_per_device", "mfu", "peak_mib", "peak_kind", "model_mib", "param_bytes",
            "flops_per_token_analytic", "flops_per_token", "flop_count_ratio",
            *FP8_COLUMNS]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(CONFIG).round(3).reset_index(drop=True)


def _name(r: pd.Series) -> str:
    mode = compile_mode(r["compile"])
    extra = [f"ac {r['ac']}" if r["ac"] != "none" else "",
             "" if mode == "off" else "compiled" if mode == "default" else f"compiled ({mode})"]
    ranks = f" on {int(r['world_size'])} ranks" if r["strategy"] != "single" else ""
    return " ".join(filter(None, [f"{r['strategy']}{ranks}", *extra]))


def conclusions(runs: pd.DataFrame) -> str:
    """Per model and work: FSDP2 against DDP (same ranks, no checkpointing), each
    checkpointing mode against none (same strategy), with intervals (sides.compare)
    and the peak memory each saves; the FLOP counts' agreement; MFU where known."""
    if runs.empty:
        return "No transformer runs yet (notebook 50)."
    parts = []
    # an emulated float8 run has no speed to compare
    timed = runs[runs["tokens_per_s"].notna()] if "tokens_per_s" in runs else runs
    for key, group in timed.groupby(SAME_WORK, dropna=False):
        work = dict(zip(SAME_WORK, key))
        head = f"{work['model']}, seq {int(work['seq_len'])}, batch {int(work['batch_size'])}, " \
               f"{work['precision']}"
        eager = group["compile"].map(compile_mode) == "off"
        plain = group[(group["ac"] == "none") & eager]
        for ranks, at in plain.groupby("world_size"):
            ddp, fsdp = at[at["strategy"] == "ddp"], at[at["strategy"] == "fsdp2"]
            if not ddp.empty and not fsdp.empty:
                text = compare(side(f"FSDP2 on {ranks} ranks", fsdp,
                                    within=repeat_spread.within(fsdp)),
                               side(f"DDP on {ranks} ranks", ddp, within=repeat_spread.within(ddp)))
                parts.append(f"- {head}: tokens/s {text}; FSDP2's peak memory is "
                             f"{memory_ratio(fsdp, ddp)} DDP's.")
        for (strategy, ranks), at in group[eager].groupby(["strategy", "world_size"]):
            none = at[at["ac"] == "none"]
            for mode, saved in at[at["ac"] != "none"].groupby("ac"):
                if none.empty:
                    continue
                text = compare(side(f"ac {mode}", saved, within=repeat_spread.within(saved)),
                               side("no checkpointing", none, within=repeat_spread.within(none)))
                parts.append(f"- {head}, {strategy} on {int(ranks)} rank(s): tokens/s {text}; "
                             f"peak memory {memory_ratio(saved, none)} without checkpointing.")
    for run in rows(runs[runs["precision"].isin(list(FP8_RECIPES))] if "precision" in runs
                    else runs.iloc[:0]):
        parts.append(f"- {fp8_claim(run).text()}.")
    ratios = runs["flop_count_ratio"].dropna()
    if len(ratios):
        worst = (ratios - 1).abs().max()
        if worst <= FLOP_TOLERANCE:
            parts.append(f"- A consistency check, not a finding: the analytic FLOPs per token "
                         f"(6N + 12·L·H·Q·T) and PyTorch's counter agree within {worst:.1%} "
                         f"(tolerance {FLOP_TOLERANCE:.0%}) over {len(ratios)} run(s), as they "
                         "must: both count the same matmuls, attention's through the math "
                         "path, so they agree by construction.")
        else:
            parts.append(f"- **The FLOP counts DISAGREE** by {worst:.1%} (tolerance "
                         f"{FLOP_TOLERANCE:.0%}) over {len(ratios)} run(s): both count the same "
                         "matmuls, so one of the counts is wrong for this model, and so is "
                         "its MFU.")
    mfu = runs["mfu"].dropna() if "mfu" in runs else pd.Series(dtype=float)
    if len(mfu):
        best = runs.loc[mfu.idxmax()]
        flops = {"analytic": "the analytic FLOP count", "counted": "PyTorch's counted FLOPs"}
        parts.append(f"- Best MFU {best['mfu']:.1%}: {_name(best)}, by "
                     f"{flops.get(value(best, 'mfu_flops'), 'the analytic FLOP count')} over "
                     f"{best['mfu_peak_source']}.")
    else:
        why = "; ".join(runs["mfu_peak_source"].dropna().unique()) if "mfu_peak_source" in runs \
            else ""
        parts.append(f"- MFU is unknown here ({why or 'the records do not say why'}); tokens/s "
                     "stands on its own.")
    caveat = shared_cores_caveat(runs)
    if caveat:
        parts.append(f"- {caveat}")
    return "\n".join(parts)


def plot(runs: pd.DataFrame):
    """tokens/s (p10-p90) and peak memory per configuration, side by side; large enough
    to read as the landing page's thumbnail."""
    import matplotlib.pyplot as plt

    shown = runs.sort_values(["model", *CONFIG])
    several = shown["model"].nunique() > 1
    names = [(f"{r['model']}: " if several else "") + _name(r) for _, r in shown.iterrows()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, max(3.2, 0.55 * len(names) + 1.6)),
                                      sharey=True)
    err = [shown["tokens_per_s"] - shown["tokens_per_s_p10"],
           shown["tokens_per_s_p90"] - shown["tokens_per_s"]]
    left.barh(names, shown["tokens_per_s"], xerr=err, color="#4c72b0")
    left.set(xlabel="tokens/s (bars p10-p90)", title="Throughput")
    right.barh(names, shown["peak_mib"], color="#dd8452")
    right.set(xlabel=f"peak MiB a rank ({shown['peak_kind'].iloc[0]})", title="Peak memory")
    for ax in (left, right):
        ax.title.set_fontsize(13)
        ax.tick_params(labelsize=11)
    fig.tight_layout()
    return fig


def fp8_claim(run: pd.Series) -> Claim:
    """A float8 row's A/B (studies/fp8.py): "fp8_tensorwise: x1.18 over bf16 for gpt2-350m
    at 1,024 tokens (95% CI 1.12-1.25, n=5 launches a side: faster); loss same (within 2%
    of bf16's)"; an emulated row's claim has no figure, and says why."""
    tokens = metric(run, "tokens_per_sample")
    work = f"{value(run, 'model')}" + (f" at {int(tokens):,} tokens" if tokens else "") + \
        f", {_name(run)}, on {value(run, 'device_name') or value(run, 'device')}"
    loss = (f"loss {value(run, 'fp8_loss_parity') or 'not judged'} (within "
            f"{metric(run, 'fp8_loss_tolerance') or 0:.0%} of bf16's on the same seeds)")
    layers = (f"{int(metric(run, 'fp8_converted') or 0)} linears in FP8, "
              f"{int(metric(run, 'fp8_kept') or 0)} kept in bf16")
    speedup = metric(run, "fp8_speedup")
    if value(run, "fp8") == "emulated" or speedup is None:
        why = value(run, "fp8_why") or "no speed recorded"
        return Claim(f"{value(run, 'precision')} over bf16 for {work}", None,
                     f"no speed: {why}; {loss}; {layers}")
    low, high = metric(run, "fp8_speedup_ci95_low"), metric(run, "fp8_speedup_ci95_high")
    spread = f"95% CI {low:.2f}-{high:.2f}" if low is not None and high is not None else \
        f"range {metric(run, 'fp8_speedup_range_low'):.2f}-" \
        f"{metric(run, 'fp8_speedup_range_high'):.2f}"
    n = f"{spread}, n={int(metric(run, 'fp8_launches'))} launches a side: " \
        f"{value(run, 'fp8_speedup_verdict')}"
    mfu, weighted = metric(run, "mfu"), metric(run, "mfu_fp8_weighted")
    mfus = "; ".join(filter(None, [f"MFU {mfu:.1%} of the dense bf16 peak" if mfu else "",
                                   f"{weighted:.1%} of the FP8-weighted peak" if weighted else ""]))
    figure = Figure(f"x{speedup:.2f}", f"over bf16 for {work}", None, n, [("", run["run_id"])])
    return Claim(str(value(run, "precision")), figure,
                 "; ".join(filter(None, [loss, layers, mfus])))


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per configuration: tokens/s with its spread, the work (model, data set, sequence,
    batch, precision, device) in its subject; its MFU and peak memory per rank in the note.
    A float8 row: its A/B against bf16 (`fp8_claim`)."""
    claims = []
    for run in rows(runs.sort_values(["model", "strategy", "ac", "compile"], kind="stable")):
        if value(run, "precision") in FP8_RECIPES:
            claims.append(fp8_claim(run))
            continue
        tps = metric(run, "tokens_per_s")
        if tps is None:
            continue
        lo, hi = metric(run, "tokens_per_s_p10"), metric(run, "tokens_per_s_p90")
        figure = Figure(fmt(tps), "tokens/s", (fmt(lo), fmt(hi)) if lo and hi else None,
                        f"n={int(metric(run, 'samples_per_s_n') or 1)}", [("", run["run_id"])])
        mfu, peak = metric(run, "mfu"), metric(run, "peak_bytes")
        note = "; ".join(filter(None, [f"MFU {mfu:.1%}" if mfu is not None else "MFU unknown",
                                       f"peak {peak / 2**20:,.0f} MiB a rank" if peak else ""]))
        data = f" on {value(run, 'dataset')}" if value(run, "dataset") else ""
        work = (f"{value(run, 'model')}{data}, seq {value(run, 'seq_len')}, batch "
                f"{value(run, 'batch_size')}, {value(run, 'precision')}, on "
                f"{value(run, 'device_name') or value(run, 'device')}")
        claims.append(Claim(f"{_name(run)}, {work}", figure, note))
    return claims, shared_cores_caveat(runs)


def figure(records: Records):
    lm = runs(records.df)
    timed = lm[lm["tokens_per_s"].notna()] if not lm.empty else lm  # emulated: no speed
    return plot(timed) if not timed.empty else None


def section(records: Records):
    lm = runs(records.df)
    yield table(lm)
    yield conclusions(lm)
