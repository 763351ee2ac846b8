"""Tables and sentences for notebooks/90_analysis.ipynb, computed from the records.

Conclusions are written from the data here, so the analysis notebook only calls,
shows and plots; each study adds its own section.
"""

from __future__ import annotations

import pandas as pd

from benchlib.reference import SEED000_RAW_OVER_PRELOAD, SEED002_P100


def overview(df: pd.DataFrame) -> pd.DataFrame:
    """One line per study: runs, ok, failed, median run time, hosts, last run."""
    if df.empty:
        return pd.DataFrame(columns=["runs", "ok", "failed", "median_run_s", "hosts", "last_run"])
    grouped = df.groupby("study")
    return pd.DataFrame({
        "runs": grouped.size(),
        "ok": grouped["status"].apply(lambda s: int((s == "ok").sum())),
        "failed": grouped["status"].apply(lambda s: int((s == "failed").sum())),
        "median_run_s": grouped["duration_s"].median().round(2),
        "hosts": grouped["host"].apply(lambda s: ", ".join(sorted(set(s.dropna())))),
        "last_run": grouped["finished_at"].max().dt.strftime("%Y-%m-%d %H:%M"),
    })


def failures(df: pd.DataFrame) -> pd.DataFrame:
    """Failed runs with their error and executed notebook."""
    cols = ["study", "run_id", "error", "executed_notebook"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    return df.loc[df["status"] == "failed", cols].reset_index(drop=True)


def data_prep(df: pd.DataFrame) -> pd.DataFrame:
    """What each data-prep run found: per data set its source, samples and bytes."""
    rows = df[(df.get("study") == "data_prep") & (df["status"] == "ok")] if not df.empty else df
    out = []
    for _, run in rows.iterrows():
        for name in ("fashion_mnist", "mydataset"):
            if pd.notna(run.get(f"{name}_source")):
                out.append({"run_id": run["run_id"], "dataset": name.replace("_", "-"),
                            "source": run[f"{name}_source"],
                            "samples": int(run[f"{name}_samples"]),
                            "MB": round(run[f"{name}_bytes"] / 1e6, 1)})
    return pd.DataFrame(out, columns=["run_id", "dataset", "source", "samples", "MB"])


def overview_text(df: pd.DataFrame) -> str:
    """The opening paragraph of the analysis, in Markdown."""
    if df.empty:
        return "No records yet: run a sweep (`python -m benchlib sweep params/smoke_cpu.yaml`)."
    ok = int((df["status"] == "ok").sum())
    failed = len(df) - ok
    text = (f"**{len(df)} runs** in {df['study'].nunique()} studies: {ok} ok, {failed} failed, "
            f"measured on {', '.join(sorted(set(df['host'].dropna())))} "
            f"between {df['started_at'].min():%Y-%m-%d %H:%M} and "
            f"{df['finished_at'].max():%Y-%m-%d %H:%M} UTC.")
    generated = data_prep(df)
    if not generated.empty and (generated["source"] == "generated").any():
        text += (" Some data sets were **generated offline** in the real on-disk format: "
                 "IO figures are comparable, accuracy figures are not.")
    if failed:
        text += " Failed runs are listed below with their errors; their numbers are not used."
    methods = sorted(set(df["method_version"]))
    if len(methods) > 1:
        text += f" Records span method versions {', '.join(methods)}: compare within one."
    return text


# ---------------------------------------------------------------- single-device IO (10)

IO_NOTEBOOKS = ("10_single_device_io.ipynb", "benchlib io (CLI)")


# runs are only pooled when they measured the same thing on the same device
SETUP = ["device_name", "epochs", "batch_size"]
IO_KEYS = [*SETUP, "dataset", "variant", "mode"]
INT_PARAMS = ("num_workers", "epochs", "batch_size", "repeats", "warmup_steps")


def io_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of the single-device IO study (notebook 10 and `benchlib io`), or, given
    the per-repeat frame of `results.load_details`, those runs' repeats."""
    if df.empty:
        return df
    io = df[df["notebook"].isin(IO_NOTEBOOKS)]
    if "status" in io:
        io = io[io["status"] == "ok"]
    return io.astype({c: int for c in INT_PARAMS if c in io}).copy()  # .copy(): one block


def workers_swept(io: pd.DataFrame) -> pd.DataFrame:
    """Only the settings that were run with more than one num_workers, labelled."""
    swept = io.groupby(IO_KEYS).filter(lambda g: g["num_workers"].nunique() > 1)
    return swept.assign(setting=swept["variant"] + " " + swept["mode"])


def variants_compared(io: pd.DataFrame) -> pd.DataFrame:
    """The fewest-workers runs of data sets measured with more than one variant."""
    fewest = io[io["num_workers"] == io.groupby(IO_KEYS)["num_workers"].transform("min")]
    return fewest.groupby("dataset").filter(lambda g: g["variant"].nunique() > 1)


def _spread(median: float, p10: float, p90: float) -> str:
    return f"{median:.3g} ({p10:.3g}-{p90:.3g})"


def io_seed_table(io: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 000's conclusion: seconds for the run's epochs, median (p10-p90),
    one row per variant, one column per (dataset, mode); the fewest workers of each."""
    if io.empty:
        return pd.DataFrame()
    fewest = _fewest_workers(io, IO_KEYS)
    cells = fewest.assign(
        column=fewest["dataset"] + ", " + fewest["mode"] + " ("
        + fewest["epochs"].astype(int).astype(str) + " ep, s, " + fewest["device_name"] + ")",
        cell=[_spread(m, lo, hi) for m, lo, hi in
              zip(fewest["total_s"], fewest["total_s_p10"], fewest["total_s_p90"])])
    return cells.pivot(index="variant", columns="column", values="cell").fillna("")


def best_workers(io: pd.DataFrame) -> pd.DataFrame:
    """Per setup and (dataset, variant, mode) swept over num_workers: the fastest, and each
    setting's speed relative to it. Runs of the same setting (from several studies)
    count as one, by their median."""
    cols = [*IO_KEYS, "num_workers", "samples_per_s", "others"]
    per_setting = workers_swept(io).groupby([*IO_KEYS, "num_workers"], as_index=False)[
        "samples_per_s"].median()
    rows = []
    for key, group in per_setting.groupby(IO_KEYS):
        best = group.loc[group["samples_per_s"].idxmax()]
        others = ", ".join(f"{int(w)} workers {sps / best['samples_per_s']:.2f}x"
                           for w, sps in zip(group["num_workers"], group["samples_per_s"])
                           if w != best["num_workers"])
        rows.append([*key, int(best["num_workers"]), best["samples_per_s"], others])
    return pd.DataFrame(rows, columns=cols)


def _fewest_workers(io: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per setting of `keys`, the runs with the fewest workers, one row each (medians)."""
    fewest = io[io["num_workers"] == io.groupby(keys)["num_workers"].transform("min")]
    return fewest.groupby(keys, as_index=False)[["total_s", "total_s_p10", "total_s_p90",
                                                 "samples_per_s"]].median()


def raw_over_preload(io: pd.DataFrame, dataset: str = "fashion-mnist",
                     mode: str = "traverse") -> dict[tuple, float]:
    """Per setup (device, epochs, batch): how many times longer `raw` takes than
    `preload` (total seconds, fewest workers)."""
    rows = io[(io["dataset"] == dataset) & (io["mode"] == mode)]
    if rows.empty:
        return {}
    table = _fewest_workers(rows, [*SETUP, "variant"]).set_index([*SETUP, "variant"])["total_s"]
    out = {}
    for setup, group in table.groupby(level=SETUP):
        by_variant = group.droplevel(SETUP)
        if {"raw", "preload"} <= set(by_variant.index):
            out[setup] = float(by_variant["raw"] / by_variant["preload"])
    return out


def io_conclusions(io: pd.DataFrame) -> str:
    """Sentences computed from the IO records, in Markdown."""
    if io.empty:
        return "No single-device IO runs yet (notebook 10, `python -m benchlib io`)."
    parts = []
    for _, b in best_workers(io).iterrows():
        parts.append(f"- **{b['dataset']}**, {b['variant']} {b['mode']} on {b['device_name']}: "
                     f"fastest with **num_workers={b['num_workers']}** "
                     f"({b['samples_per_s']:,.0f} samples/s; {b['others']}).")
    for mode in ("traverse", "train"):
        for (device, epochs, _), ratio in raw_over_preload(io, mode=mode).items():
            parts.append(_ratio_line(mode, device, epochs, ratio))
    devices = ", ".join(sorted(set(io["device_name"])))
    sources = ", ".join(sorted(set(io["data_source"])))
    parts.append(f"- Measured on {devices}; data: {sources}.")
    return "\n".join(parts)


def _ratio_line(mode: str, device: str, epochs: int, ratio: float) -> str:
    text = f"- FashionMNIST {mode} on {device} ({epochs} ep): raw takes **{ratio:.1f}x** as long as preload"
    if mode == "traverse":
        seed = SEED000_RAW_OVER_PRELOAD
        verdict = ("agrees with" if 0.5 <= ratio / seed <= 2 else
                   "is well below" if ratio < seed else "is well above")
        text += (f"; seed 000 measured {seed:.1f}x on a GTX 1050, and this machine "
                 f"{verdict} it (within a factor 2 counts as agreeing). Decoding each item "
                 "every epoch, not the storage library, is what costs")
    return text + "."


def ok_runs(df: pd.DataFrame, notebook: str, marker: str, ints: tuple[str, ...]) -> pd.DataFrame:
    """The ok runs of one notebook (none when no record has its `marker` parameter), with
    the integer columns typed back (a frame of mixed studies holds them as floats)."""
    if df.empty or marker not in df:
        return pd.DataFrame()
    runs = df[(df["notebook"] == notebook) & (df["status"] == "ok")]
    return runs.astype({c: int for c in ints}).copy() if not runs.empty else runs.copy()


def with_speedup(runs: pd.DataFrame, same_work: list[str], baseline: pd.Series,
                 devices: str) -> pd.DataFrame:
    """speedup = median samples/s of a run / median of the baseline runs doing the same
    work (same values of `same_work`); efficiency = speedup / devices. No baseline: NaN."""
    runs = runs.copy()  # one block again: astype() on a wide frame leaves it fragmented
    base = runs[baseline].groupby(same_work)["samples_per_s"].median().to_dict()
    per_run = runs.set_index(same_work).index.map(base.get)
    runs = runs.assign(speedup=runs["samples_per_s"] / pd.Series(per_run, index=runs.index,
                                                                   dtype=float))
    return runs.assign(efficiency=runs["speedup"] / runs[devices])


# ---------------------------------------------------------------- DP vs DDP (20)

DIST_NOTEBOOK = "20_dp_vs_ddp.ipynb"
SAME_WORK = ["study", "dataset", "model", "depth", "alpha", "batch_size", "device"]


def dist_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 20, with speedup and efficiency against the single-device
    run of the same study, data, model, per-device batch and device."""
    runs = ok_runs(df, DIST_NOTEBOOK, "strategy", ("nproc_per_node", "batch_size", "depth",
                                                   "alpha", "devices", "global_batch"))
    if runs.empty:
        return runs
    return with_speedup(runs, SAME_WORK, runs["strategy"] == "single", "devices")


def dist_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 002's comparison: one row per strategy and launcher."""
    cols = ["strategy", "launcher", "devices", "global_batch", "batch_s", "epoch_s",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "efficiency",
            "gpu_util_pct", "cpu_util_pct", "busbw_gbps"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    table = runs.reindex(columns=cols).copy()
    table.loc[table["strategy"] != "ddp", "launcher"] = "-"
    return table.sort_values(["devices", "strategy"]).round(3).reset_index(drop=True)


def seed002_table() -> pd.DataFrame:
    """Seed 002's own figures (PyramidNet, CIFAR-10, Tesla P100, batch 64)."""
    table = pd.DataFrame(SEED002_P100)
    table["epoch_speedup"] = (table.loc[0, "epoch_s"] / table["epoch_s"]).round(2)
    return table


def dist_conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No DataParallel / DDP runs yet (notebook 20)."
    parts = []
    for _, r in dist_table(runs).iterrows():
        if r["strategy"] == "single" or pd.isna(r["speedup"]):
            continue
        how = "DataParallel" if r["strategy"] == "dp" else f"DDP via {r['launcher']}"
        parts.append(f"- **{how}** on {int(r['devices'])} device(s): {r['samples_per_s']:,.1f} "
                     f"samples/s, **speedup {r['speedup']:.2f}x**, efficiency {r['efficiency']:.0%}.")
    seed = seed002_table().set_index("strategy")["epoch_speedup"]
    parts.append(f"- Seed 002 on two P100s: DDP finished an epoch {seed['ddp']:.2f}x faster than one "
                 f"GPU, DataParallel {seed['dp']:.2f}x; DDP ahead of DP is what to expect when "
                 "each rank has its own device and cores.")
    devices = ", ".join(sorted(set(runs["device_name"])))
    threads = ", ".join(str(int(t)) for t in sorted(set(runs["threads_per_rank"].dropna())))
    parts.append(f"- Measured on {devices} ({threads} thread(s) per rank). On a CPU-only host the "
                 "ranks share its cores, so speedup says what the launch and the all-reduce "
                 "cost there, not what more GPUs would give.")
    return "\n".join(parts)


# ---------------------------------------------------------------- framework comparison (40)

FRAMEWORK_NOTEBOOK = "40_framework_comparison.ipynb"


def framework_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 40, with speedup and efficiency against the one-device run
    of the same arch, batch, image size, variant and device."""
    runs = ok_runs(df, FRAMEWORK_NOTEBOOK, "arch", ("nproc_per_node", "batch_size", "image_size"))
    if runs.empty:
        return runs
    runs["variant"] = runs["precision"] + runs["channels_last"].map({True: "+nhwc", False: ""}) \
        + runs["compile"].map({True: "+compile", False: ""})
    keys = ["study", "arch", "dataset", "image_size", "batch_size", "variant", "device"]
    return with_speedup(runs, keys, runs["nproc_per_node"] == 1, "nproc_per_node")


def framework_table(runs: pd.DataFrame) -> pd.DataFrame:
    cols = ["arch", "dataset", "image_size", "batch_size", "nproc_per_node", "variant",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "efficiency",
            "mfu", "jax_samples_per_s", "jax_over_pytorch", "device_name"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["batch_size", "nproc_per_node", "variant"]).round(3) \
        .reset_index(drop=True)


def speedup_curves(runs: pd.DataFrame, batch_size: int | None = None) -> pd.DataFrame:
    """Every framework's speedup over devices from seed 003, plus ours, in one frame
    (framework, devices, speedup) for a single plot. The batch size is ours when we
    measured one that the seed has, else 128."""
    from benchlib.reference import dlperf

    ref = dlperf()
    if batch_size is None:
        measured = set(runs["batch_size"]) if not runs.empty else set()
        batch_size = max(measured & set(ref["batch_size"]), default=128)
    curves = ref[(ref["batch_size"] == batch_size) & ref["speedup"].notna()]
    curves = curves.assign(framework=curves["framework"] + " (V100, seed 003)")
    out = [curves[["framework", "devices", "speedup"]]]
    if not runs.empty:
        scaled = runs.groupby("variant").filter(lambda g: g["nproc_per_node"].nunique() > 1)
        ours = scaled.dropna(subset=["speedup"]).groupby(["variant", "nproc_per_node"],
                                                         as_index=False)["speedup"].median()
        out.append(pd.DataFrame({"framework": "PyTorch here, " + ours["variant"],
                                 "devices": ours["nproc_per_node"], "speedup": ours["speedup"]}))
    return pd.concat(out, ignore_index=True)


def framework_conclusions(runs: pd.DataFrame) -> str:
    from benchlib.reference import dlperf

    if runs.empty:
        return "No framework-comparison runs yet (notebook 40)."
    parts = []
    one = runs[runs["nproc_per_node"] == 1]
    if not one.empty:
        best = one.loc[one["samples_per_s"].idxmax()]
        parts.append(f"- Fastest variant on one device here: **{best['variant']}**, "
                     f"{best['samples_per_s']:,.1f} samples/s ({best['arch']}, batch "
                     f"{best['batch_size']}, {best['image_size']}px, {best['dataset']}).")
    for _, r in runs.dropna(subset=["speedup"]).iterrows():
        if r["nproc_per_node"] > 1:
            parts.append(f"- {r['variant']} on {r['nproc_per_node']} devices: speedup "
                         f"{r['speedup']:.2f}x, efficiency {r['efficiency']:.0%}.")
    ref = dlperf()
    py = ref[(ref["framework"] == "PyTorch") & (ref["batch_size"] == 128)].set_index("devices")
    parts.append(f"- Seed 003 (PyTorch 1.6, V100, batch 128): 8 GPUs gave {py.loc[8, 'speedup']:.2f}x "
                 f"({py.loc[8, 'efficiency']:.0%}), 32 GPUs {py.loc[32, 'speedup']:.1f}x; "
                 "OneFlow's rows scale almost linearly on the same machines.")
    if runs["mfu"].isna().all():
        parts.append("- MFU is unknown here: no published peak for this device (never invented).")
    else:
        top = runs.loc[runs["mfu"].idxmax()]
        parts.append(f"- Highest MFU: {top['mfu']:.1%} ({top['variant']}, {top['device_name']}).")
    parts.append(_jax_sentence(runs))
    if set(runs["image_size"]) != {224} or set(runs["arch"]) != {"resnet50"}:
        parts.append("- Some runs are not ResNet-50 at 224px: compare their scaling, not their "
                     "samples/s, with the published rows.")
    return "\n".join(parts)


def _jax_sentence(runs: pd.DataFrame) -> str:
    measured = runs.dropna(subset=["jax_samples_per_s"]) if "jax_samples_per_s" in runs \
        else runs.iloc[0:0]
    if measured.empty:
        why = runs["jax_skipped"].dropna() if "jax_skipped" in runs else pd.Series(dtype=str)
        return ("- JAX was not measured here" + (f" ({why.iloc[0]})" if len(why) else "") +
                ": the comparison with other frameworks rests on the published tables.")
    ratio = measured["jax_over_pytorch"]
    return (f"- JAX {measured['jax_version'].iloc[0]} on the same machine, same ResNet and timing "
            f"({len(measured)} row(s)): **{ratio.median():.2f}x PyTorch's samples/s** "
            f"(from {ratio.min():.2f}x to {ratio.max():.2f}x); its first step, the XLA compile, "
            f"took {measured['jax_compile_s'].median():.1f} s.")


# ---------------------------------------------------------------- multi-node (30)

MULTINODE_NOTEBOOK = "30_multinode_lightning.ipynb"
MULTINODE_WORK = ["study", "trainer", "dataset", "model", "depth", "alpha", "batch_size", "device"]


def multinode_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 30; speedup against the one-device run of the same trainer
    and work (any launcher), efficiency = speedup / total devices."""
    runs = ok_runs(df, MULTINODE_NOTEBOOK, "trainer", ("nnodes", "nproc_per_node", "batch_size",
                                                       "depth", "alpha", "world_size",
                                                       "global_batch"))
    if runs.empty:
        return runs
    return with_speedup(runs, MULTINODE_WORK, runs["world_size"] == 1, "world_size")


def multinode_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """Notebook 30's per-epoch rows (`results.load_details(..., "epochs")`) with the total
    devices and a label "<trainer> via <launcher>", for one point per epoch in a plot."""
    if epochs.empty or "nnodes" not in epochs:
        return pd.DataFrame()
    rows = epochs[epochs["notebook"] == MULTINODE_NOTEBOOK]
    if rows.empty:
        return rows
    rows = rows.astype({"nnodes": int, "nproc_per_node": int})
    return rows.assign(devices=rows["nnodes"] * rows["nproc_per_node"],
                       how=rows["trainer"] + " via " + rows["launcher"])


def multinode_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 000's tables: one row per trainer, launcher and layout."""
    cols = ["trainer", "launcher", "nnodes", "nproc_per_node", "world_size", "global_batch",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "efficiency",
            "epoch_s", "launch_s", "device_name"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["world_size", "trainer", "launcher", "nnodes"]) \
        .round(3).reset_index(drop=True)


def lightning_overhead(runs: pd.DataFrame) -> pd.DataFrame:
    """Lightning against raw DDP for the same layout and work: how much slower Lightning
    trains (samples/s; the spread pairs p10 against p90) and starts (launch to result)."""
    cols = ["nnodes", "nproc_per_node", "ddp_samples_per_s", "lightning_samples_per_s",
            "overhead", "overhead_low", "overhead_high", "extra_launch_s"]
    if runs.empty or set(runs["trainer"]) != {"ddp", "lightning"}:
        return pd.DataFrame(columns=cols)
    keys = [k for k in MULTINODE_WORK if k != "trainer"] + ["nnodes", "nproc_per_node"]
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


def multinode_conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No multi-node runs yet (notebook 30)."
    parts = []
    for r in multinode_table(runs).itertuples():
        if r.world_size == 1 or pd.isna(r.speedup):
            continue
        parts.append(f"- **{r.trainer}** via {r.launcher} on {r.nnodes} node(s) x "
                     f"{r.nproc_per_node}: {r.samples_per_s:,.1f} samples/s (p10-p90 "
                     f"{r.samples_per_s_p10:,.1f}-{r.samples_per_s_p90:,.1f}), speedup "
                     f"**{r.speedup:.2f}x**, efficiency {r.efficiency:.0%}.")
    for o in lightning_overhead(runs).itertuples():
        parts.append(f"- {o.nnodes} x {o.nproc_per_node}: raw DDP's samples/s are "
                     f"{o.overhead:+.0%} against Lightning's (spread {o.overhead_low:+.0%} to "
                     f"{o.overhead_high:+.0%}; positive: Lightning is slower); launch to result, "
                     f"Lightning {o.extra_launch_s:+.1f} s against raw DDP.")
    devices = ", ".join(sorted(set(runs["device_name"])))
    parts.append(f"- Measured on {devices}. Nodes on one host share its cores and talk over "
                 "loopback, so these figures show what the launchers and the process groups "
                 "cost, not what a network between real nodes would.")
    return "\n".join(parts)


# ---------------------------------------------------------------- fault tolerance (35)

FAULT_NOTEBOOK = "35_fault_tolerance.ipynb"


def fault_runs(df: pd.DataFrame) -> pd.DataFrame:
    return ok_runs(df, FAULT_NOTEBOOK, "fail_at_step", ("nproc_per_node", "checkpoint_every",
                                                        "fail_at_step", "restarts",
                                                        "steps_redone", "final_step"))


def fault_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the failure, what it cost, and whether the run came back to the
    same loss as the uninterrupted one."""
    cols = ["model", "dataset", "nproc_per_node", "checkpoint_every", "fail_at_step",
            "restarts", "steps_redone", "recovery_s", "redo_s", "checkpoint_s", "final_step",
            "loss_last", "loss_last_uninterrupted", "loss_diff", "samples_per_s"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["fail_at_step", "checkpoint_every"]) \
        .reset_index(drop=True)


def fault_conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No fault-tolerance runs yet (notebook 35)."
    parts = []
    for r in fault_table(runs).itertuples():
        if not r.restarts:
            parts.append(f"- No restart ({r.nproc_per_node} ranks, fail_at_step "
                         f"{r.fail_at_step}): {r.samples_per_s:,.0f} samples/s.")
            continue
        line = (f"- {r.nproc_per_node} ranks, a rank killed after step {r.fail_at_step} with a "
                f"checkpoint every {r.checkpoint_every} steps: **{r.restarts} restart(s), "
                f"{r.steps_redone} step(s) redone, back to training in {r.recovery_s:.1f} s** "
                f"(a checkpoint took {r.checkpoint_s * 1e3:.0f} ms)")
        if pd.notna(r.loss_diff):
            same = "the same" if r.loss_diff <= 1e-6 * max(abs(r.loss_last), 1) else "a different"
            line += (f"; it ended at {same} loss as the uninterrupted run "
                     f"({r.loss_last:.6f} vs {r.loss_last_uninterrupted:.6f})")
        parts.append(line + ".")
    parts.append("- Steps redone are at most `checkpoint_every - 1`: checkpointing more often "
                 "trades a little time every few steps for less work lost per failure. Most of "
                 "the recovery time is torchrun starting the processes again and importing torch.")
    return "\n".join(parts)
