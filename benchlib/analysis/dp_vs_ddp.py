"""The dp_vs_ddp study (notebook 20): single, DP and DDP side by side with speedup and
efficiency, beside seed 002's own figures; its headline, its main figure (each setup's
speedup over one process) and notebook 90's section, all from `runs()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis import repeat_spread
from benchlib.analysis.claims import (
    Claim,
    joined_caveats,
    ratio_figure,
    rows,
    samples_figure,
    value,
    work_text,
)
from benchlib.analysis.common import (
    above_linear_caveat,
    ok_runs,
    ranks,
    shared_cores_caveat,
    speedup_of_text,
    startup_sentence,
    with_speedup,
)
from benchlib.analysis.sides import compare, side
from benchlib.config import DpVsDdpConfig, studies
from benchlib.reference import SEED002_P100

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Single, DP and DDP side by side: samples/s with spread, speedup and efficiency "
         "against the single-device run of the same work, and seed 002's figures from two "
         "P100s below. Where a row was measured both ways (`repeat_mode`: `epoch`, epochs "
         "inside one launch; `process`, a fresh launch per repeat), the table above the "
         "conclusions gives each mode's spread.")
# a speedup's baseline does the same work on the same hardware (not the same `device`
# parameter: "auto" on a GPU host and "cuda" there are one machine, "cpu" on two hosts two)
SPREAD_SHOWN = ["strategy", "launcher", "devices", "model", "dataset"]
SAME_WORK = ["table", "dataset", "model", "depth", "alpha", "batch_size", "precision", "hardware"]


def is_baseline(runs: pd.DataFrame) -> pd.Series:
    """The runs a speedup is taken over: one process (strategy single). The table and the
    headline both ask this."""
    return runs["strategy"] == "single"


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 20, with speedup and efficiency against the single-device
    run of the same study, data, model, per-device batch, precision and hardware
    (common.with_speedup: its spread and baselines' run ids too)."""
    runs = ok_runs(df, STUDY, ("nproc_per_node", "batch_size", "depth", "alpha", "devices",
                               "global_batch"))
    if runs.empty:
        return runs
    # the study has no precision parameter: fp32 is what its trainer runs (a frame of
    # mixed studies holds NaN there, which groupby would drop)
    runs["precision"] = runs["precision"].fillna("fp32") if "precision" in runs else "fp32"
    return with_speedup(runs, SAME_WORK, is_baseline(runs), "devices")


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 002's comparison: one row per strategy and launcher."""
    cols = ["strategy", "launcher", "devices", "global_batch", "batch_s", "epoch_s",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "speedup_p10",
            "speedup_p90", "efficiency", "speedup_of", "epoch_samples_per_s", "first_batch_s",
            "gpu_util_pct", "cpu_util_pct", "busbw_gbps"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    table = runs.reindex(columns=cols).copy()
    table.loc[table["strategy"] != "ddp", "launcher"] = "-"
    return table.sort_values(["devices", "strategy"]).round(3).reset_index(drop=True)


def spreads(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows measured both ways (repeat_mode epoch and process): each one's spread."""
    return repeat_spread.table(runs, DpVsDdpConfig.field_names(), SPREAD_SHOWN)


def seed002_table() -> pd.DataFrame:
    """Seed 002's own figures (PyramidNet, CIFAR-10, Tesla P100, batch 64)."""
    table = pd.DataFrame(SEED002_P100)
    table["epoch_speedup"] = (table.loc[0, "epoch_s"] / table["epoch_s"]).round(2)
    return table


def conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No DataParallel / DDP runs yet (notebook 20)."
    parts = []
    shown = table(runs)
    for _, r in shown[~is_baseline(shown)].iterrows():
        if pd.isna(r["speedup"]):
            continue
        how = "DataParallel" if r["strategy"] == "dp" else f"DDP via {r['launcher']}"
        parts.append(f"- **{how}** on {int(r['devices'])} device(s): {r['samples_per_s']:,.1f} "
                     f"samples/s, **speedup {r['speedup']:.2f}x**{speedup_of_text(r['speedup_of'])}, "
                     f"efficiency {r['efficiency']:.0%}.")
    parts += dp_against_ddp(runs)
    parts += repeat_spread.sentences(spreads(runs), SPREAD_SHOWN)
    seed = seed002_table().set_index("strategy")["epoch_speedup"]
    parts.append(f"- Seed 002 on two P100s: DDP finished an epoch {seed['ddp']:.2f}x faster than one "
                 f"GPU, DataParallel {seed['dp']:.2f}x.")
    devices = ", ".join(sorted(set(runs["device_name"].dropna())))
    threads = ", ".join(str(int(t)) for t in sorted(set(runs["threads_per_rank"].dropna())))
    parts.append(f"- Measured on {devices} ({threads} thread(s) per rank).")
    for caveat in (shared_cores_caveat(runs), startup_sentence(runs)):
        if caveat:
            parts.append(f"- {caveat}")
    return "\n".join(parts)


def dp_against_ddp(runs: pd.DataFrame) -> list[str]:
    """One sentence per device count and DDP launcher with both DP and DDP runs of the
    same work: which is faster, by how much, with its interval (sides.compare)."""
    keys = [*SAME_WORK, "devices"]
    parts = []
    for key, group in runs[~is_baseline(runs)].groupby(keys):
        dp = group[group["strategy"] == "dp"]
        for launcher, ddp in group[group["strategy"] == "ddp"].groupby("launcher"):
            if dp.empty:
                continue
            text = compare(side(f"DDP via {launcher}", ddp, within=repeat_spread.within(ddp)),
                           side("DataParallel", dp, within=repeat_spread.within(dp)))
            where = dict(zip(keys, key))
            parts.append(f"- {where['devices']} device(s), batch {where['batch_size']} per "
                         f"device: {text}.")
    return parts


def _how(run: pd.Series, count: float) -> tuple[tuple, str]:
    """(order, name) of a run's setup on `count` ranks (common.ranks): DDP via torchrun
    first, then the other launchers, then DataParallel."""
    if value(run, "strategy") == "dp":
        return (2, ""), f"DataParallel on {int(count)} device(s)"
    launcher = value(run, "launcher")
    backend = value(run, "backend_used") or value(run, "backend")
    return (0 if launcher == "torchrun" else 1, str(launcher)), \
        f"DDP via {launcher} on {int(count)} {backend} ranks"


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per work (SAME_WORK): each DP and DDP setup's speedup over one process, as the
    table holds it, the work and device named in each claim; only single-process runs:
    their samples/s."""
    if runs.empty:
        return [], ""
    claims: list[tuple[tuple, Claim]] = []
    base, count = is_baseline(runs), ranks(runs)
    for _, group in runs.groupby(SAME_WORK, sort=False, dropna=False):
        for run in rows(group):
            if base[run.name]:
                continue
            order, how = _how(run, count[run.name])
            figure = ratio_figure(run, runs, "over one process", "epochs")
            note = "" if figure else "no single-process run of the same work to compare with"
            claims.append(((order, work_text(run)), Claim(
                f"{how}, {work_text(run)}", figure or samples_figure(run, "epochs"), note)))
    if not claims:
        return [Claim(f"one process, {work_text(r)}", samples_figure(r, "epochs"))
                for r in rows(runs)], ""
    ordered = [c for _, c in sorted(claims, key=lambda oc: oc[0])]
    return ordered, joined_caveats(shared_cores_caveat(runs), above_linear_caveat(runs),
                                   startup_sentence(runs))


def figure(records: Records):
    """Each DP and DDP setup's speedup over one process (bars: its spread as the table
    holds it, common.with_ratio), per work; the dotted line is no speedup."""
    scaled = runs(records.df)
    scaled = scaled[~is_baseline(scaled) & scaled["speedup"].notna()] \
        if not scaled.empty else scaled
    if scaled.empty:
        return None
    import matplotlib.pyplot as plt

    count = ranks(scaled)
    names = [_how(r, count[i])[1].replace(" on ", "\non ") +
             f"\n{r['model']}, batch {r['batch_size']}" for i, r in scaled.iterrows()]
    # whole-epoch speedups keep no spread: no bar
    low = (scaled["speedup"] - scaled["speedup_p10"]).fillna(0)
    high = (scaled["speedup_p90"] - scaled["speedup"]).fillna(0)
    fig, ax = plt.subplots(figsize=(7, 0.7 * len(names) + 1.6))
    ax.barh(names, scaled["speedup"], xerr=[low.clip(lower=0), high.clip(lower=0)],
            color="#4c72b0")
    ax.axvline(1, color="grey", linestyle=":")
    ax.set(xlabel="speedup over one process (x)", title="DataParallel and DDP against one process")
    fig.tight_layout()
    return fig


def section(records: Records):
    """The table, seed 002's figures, the all_reduce bus bandwidth against message size,
    the spreads of rows measured both ways, and the sentences."""
    dist_runs = runs(records.df)
    yield table(dist_runs)
    yield seed002_table()
    sizes = records.details("allreduce")
    if not sizes.empty:
        import matplotlib.pyplot as plt
        import seaborn as sns

        fig, ax = plt.subplots()
        sns.lineplot(data=sizes, x="bytes", y="busbw_gbps", hue="launcher", marker="o", ax=ax)
        ax.set(xscale="log", xlabel="message size (bytes)", ylabel="busbw (GB/s)",
               title="all_reduce bus bandwidth")
        yield fig
    dist_spreads = spreads(dist_runs)
    if not dist_spreads.empty:
        yield dist_spreads.round(3)
    yield conclusions(dist_runs)
