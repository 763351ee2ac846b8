"""The multinode_lightning study (notebook 30): throughput against total devices per
trainer and launcher, and what Lightning costs over raw DDP for the same layout; its
headline, main figure and notebook 90's section, all from `runs()`."""

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
from benchlib.config import MultinodeLightningConfig, studies

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Samples/s against total devices per trainer and launcher (each epoch one point, "
         "bars p10-p90), speedup and efficiency against the one-device run of the same "
         "trainer, and what Lightning costs over raw DDP for the same layout.")
SPREAD_SHOWN = ["trainer", "launcher", "nnodes", "nproc_per_node", "model"]
SAME_WORK = ["table", "trainer", "dataset", "model", "depth", "alpha", "batch_size", "hardware"]


def is_baseline(runs: pd.DataFrame) -> pd.Series:
    """The runs a speedup is taken over: one rank in all (world_size, common.ranks). The
    table and the headline both ask this."""
    return ranks(runs) == 1


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 30; speedup against the one-device run of the same trainer
    and work (any launcher; common.with_speedup: its spread and baselines' run ids too),
    efficiency = speedup / total devices."""
    runs = ok_runs(df, STUDY, ("nnodes", "nproc_per_node", "batch_size", "depth", "alpha",
                               "world_size", "global_batch"))
    if runs.empty:
        return runs
    return with_speedup(runs, SAME_WORK, is_baseline(runs), "world_size")


def epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """Notebook 30's per-epoch rows (`results.load_details(..., "epochs")`) with the total
    devices and a label "<trainer> via <launcher>", for one point per epoch in a plot."""
    if epochs.empty or "nnodes" not in epochs:
        return pd.DataFrame()
    rows = epochs[epochs["study"] == STUDY]
    if rows.empty:
        return rows
    rows = rows.astype({"nnodes": int, "nproc_per_node": int})
    return rows.assign(devices=rows["nnodes"] * rows["nproc_per_node"],
                       how=rows["trainer"] + " via " + rows["launcher"])


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 000's tables: one row per trainer, launcher and layout."""
    cols = ["trainer", "launcher", "nnodes", "nproc_per_node", "world_size", "global_batch",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "speedup_p10",
            "speedup_p90", "efficiency", "speedup_of", "epoch_samples_per_s", "first_batch_s",
            "epoch_s", "launch_s", "device_name"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["world_size", "trainer", "launcher", "nnodes"]) \
        .round(3).reset_index(drop=True)


def spreads(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows measured both ways (repeat_mode epoch and process): each one's spread."""
    return repeat_spread.table(runs, MultinodeLightningConfig.field_names(), SPREAD_SHOWN)


def lightning_overhead(runs: pd.DataFrame) -> pd.DataFrame:
    """Lightning against raw DDP for the same layout and work: how much slower Lightning
    trains (samples/s; the spread pairs p10 against p90) and starts (launch to result)."""
    cols = ["nnodes", "nproc_per_node", "ddp_samples_per_s", "lightning_samples_per_s",
            "overhead", "overhead_low", "overhead_high", "extra_launch_s"]
    if runs.empty or set(runs["trainer"]) != {"ddp", "lightning"}:
        return pd.DataFrame(columns=cols)
    keys = [k for k in SAME_WORK if k != "trainer"] + ["nnodes", "nproc_per_node"]
    stats = ["samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "launch_s"]
    med = runs.groupby([*keys, "trainer"])[stats].median().unstack("trainer").dropna()
    if med.empty:
        return pd.DataFrame(columns=cols)
    ddp, light = (med.xs(t, axis=1, level="trainer") for t in ("ddp", "lightning"))
    out = pd.DataFrame({
        "ddp_samples_per_s": ddp["samples_per_s"],
        "lightning_samples_per_s": light["samples_per_s"],
        "overhead": ddp["samples_per_s"] / light["samples_per_s"] - 1,
        "overhead_low": ddp["samples_per_s_p10"] / light["samples_per_s_p90"] - 1,
        "overhead_high": ddp["samples_per_s_p90"] / light["samples_per_s_p10"] - 1,
        "extra_launch_s": light["launch_s"] - ddp["launch_s"],
    }).reset_index()
    return out[cols].round(3)


def conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No multi-node runs yet (notebook 30)."
    parts = []
    shown = table(runs)
    for r in shown[~is_baseline(shown)].itertuples():
        if pd.isna(r.speedup):
            continue
        parts.append(f"- **{r.trainer}** via {r.launcher} on {r.nnodes} node(s) x "
                     f"{r.nproc_per_node}: {r.samples_per_s:,.1f} samples/s (p10-p90 "
                     f"{r.samples_per_s_p10:,.1f}-{r.samples_per_s_p90:,.1f}), speedup "
                     f"**{r.speedup:.2f}x**"
                     f"{speedup_of_text(r.speedup_of)}"
                     f", efficiency {r.efficiency:.0%}.")
    parts += lightning_against_ddp(runs)
    parts += repeat_spread.sentences(spreads(runs), SPREAD_SHOWN)
    devices = ", ".join(sorted(set(runs["device_name"].dropna())))
    parts.append(f"- Measured on {devices}.")
    if startup := startup_sentence(runs):
        parts.append(f"- {startup}")
    shared = runs[(topology(runs) == "one host") & (runs["nnodes"] > 1)]
    if not shared.empty:
        layouts = ", ".join(sorted({f"{r.nnodes} x {r.nproc_per_node}" for r in shared.itertuples()}))
        parts.append(f"- The multi-node runs here ({layouts}) put every node on one host: they "
                     "shared its cores and talked over loopback, so they show what the launchers "
                     "and the process groups cost, not what a network between nodes would.")
    return "\n".join(parts)


def topology(runs: pd.DataFrame) -> pd.Series:
    """Where each run's ranks ran (the record's `topology`, from the hosts in the ranks'
    banners); records from before it: every launcher but srun starts its nodes here."""
    recorded = runs["topology"] if "topology" in runs else pd.Series(None, index=runs.index,
                                                                     dtype=object)
    derived = runs["launcher"].map(lambda how: "unknown" if how == "srun" else "one host")
    return recorded.fillna(derived)


def lightning_against_ddp(runs: pd.DataFrame) -> list[str]:
    """Per layout and work with both trainers: which trains faster, with its interval, and
    the difference in time from launch to result."""
    parts = []
    keys = [k for k in SAME_WORK if k != "trainer"] + ["nnodes", "nproc_per_node"]
    for key, group in runs.groupby(keys):
        light, ddp = (group[group["trainer"] == t] for t in ("lightning", "ddp"))
        if light.empty or ddp.empty:
            continue
        where = dict(zip(keys, key))
        extra = light["launch_s"].median() - ddp["launch_s"].median()
        pair = [side(name, g, within=repeat_spread.within(g))
                for name, g in (("Lightning", light), ("raw DDP", ddp))]
        parts.append(f"- {where['nnodes']} x {where['nproc_per_node']}: {compare(*pair)}; launch to "
                     f"result, Lightning {extra:+.1f} s against raw DDP.")
    return parts


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per trainer and work (SAME_WORK): each layout's speedup over 1 rank of the same
    trainer, as the table holds it, most ranks first, the work and device named in each
    claim."""
    if runs.empty:
        return [], ""
    claims: list[tuple[tuple, Claim]] = []
    base, count = is_baseline(runs), ranks(runs)
    for _, group in runs.groupby(SAME_WORK, sort=False, dropna=False):
        for run in rows(group):
            if base[run.name]:
                continue
            trainer, launcher = value(run, "trainer"), value(run, "launcher")
            subject = (f"{trainer} via {launcher} on {value(run, 'nnodes')} node(s) x "
                       f"{value(run, 'nproc_per_node')}, {work_text(run)}")
            figure = ratio_figure(run, runs, f"over 1 rank of {trainer}", "epochs")
            note = "" if figure else "no 1-rank run of the same trainer and work to compare with"
            order = (-count[run.name], trainer != "ddp", launcher != "torchrun", work_text(run))
            claims.append((order, Claim(subject, figure or samples_figure(run, "epochs"), note)))
    if not claims:
        return [Claim(f"{value(r, 'trainer')} on 1 rank, {work_text(r)}",
                      samples_figure(r, "epochs")) for r in rows(runs)], ""
    ordered = [c for _, c in sorted(claims, key=lambda oc: oc[0])]
    return ordered, joined_caveats(shared_cores_caveat(runs), above_linear_caveat(runs),
                                   startup_sentence(runs))


def figure(records: Records):
    """Samples/s against total devices, one point per epoch (bars p10-p90), per trainer
    and launcher."""
    mn_epochs = epochs(records.details("epochs"))
    if mn_epochs.empty:
        return None
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots()
    sns.pointplot(data=mn_epochs, x="devices", y="samples_per_s", hue="how",
                  errorbar=("pi", 80), dodge=0.3, ax=ax)
    ax.set(xlabel="total devices (nodes x per node)", ylabel="samples/s (global)",
           title="Multi-node throughput")
    return fig


def section(records: Records):
    """The table, Lightning's cost over raw DDP, the spreads of rows measured both ways,
    and the sentences."""
    mn_runs = runs(records.df)
    yield table(mn_runs)
    yield lightning_overhead(mn_runs)
    mn_spreads = spreads(mn_runs)
    if not mn_spreads.empty:
        yield mn_spreads.round(3)
    yield conclusions(mn_runs)
