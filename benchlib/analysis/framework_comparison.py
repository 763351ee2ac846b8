"""The framework_comparison study (notebook 40): our ResNet rows with speedup, efficiency
and MFU, every framework's speedup curve from seed 003, and JAX measured beside us; its
headline (ResNet rows first: they answer the study's question), main figure and notebook
90's section, all from `runs()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis import repeat_spread
from benchlib.analysis.claims import (
    Claim,
    device_text,
    joined_caveats,
    metric,
    ratio_figure,
    rows,
    samples_figure,
    value,
)
from benchlib.analysis.common import (
    above_linear_caveat,
    model_column,
    ok_runs,
    shared_cores_caveat,
    speed_kept,
    speedup_of_text,
    startup_sentence,
    with_speedup,
)
from benchlib.config import FrameworkComparisonConfig, studies
from benchlib.reference import dlperf

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Our rows with speedup, efficiency and MFU (ResNet first: the study's question; "
         "models of one's own after), then every framework's speedup over devices from "
         "seed 003 on one plot, with ours.")
SPREAD_SHOWN = ["model", "nproc_per_node", "variant", "batch_size"]
# the same work: a baseline for a speedup, and the runs ranked against each other
SAME_WORK = ["table", "model", "dataset", "image_size", "seq_len", "batch_size", "variant",
             "hardware"]


def is_baseline(runs: pd.DataFrame) -> pd.Series:
    """The runs a speedup is taken over: one device (nproc_per_node 1). The table, the
    headline and the sentences all ask this."""
    return runs["nproc_per_node"] == 1


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of notebook 40, with `variant` (precision, channels_last, compile) and
    speedup and efficiency against the one-device run of the same work (SAME_WORK;
    common.with_speedup: its spread and baselines' run ids too)."""
    runs = speed_kept(ok_runs(df, STUDY, ("nproc_per_node", "batch_size", "image_size")))
    if runs.empty:
        return runs
    runs["model"] = model_column(runs)
    runs["seq_len"] = runs["seq_len"].fillna(0) if "seq_len" in runs else 0
    runs["variant"] = runs["precision"] + runs["channels_last"].map({True: "+nhwc", False: ""}) \
        + runs["compile"].map(lambda c: "" if c in (False, "off", None) else
                              "+compile" if c in (True, "default") else f"+compile-{c}")
    return with_speedup(runs, SAME_WORK, is_baseline(runs), "nproc_per_node")


def spreads(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows measured both ways (repeat_mode epoch and process): each one's spread."""
    return repeat_spread.table(runs, FrameworkComparisonConfig.field_names(), SPREAD_SHOWN)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    cols = ["model", "dataset", "image_size", "batch_size", "nproc_per_node", "variant",
            "samples_per_s", "samples_per_s_p10", "samples_per_s_p90", "speedup", "speedup_p10",
            "speedup_p90", "efficiency", "speedup_of", "epoch_samples_per_s", "first_batch_s",
            "mfu", "jax_samples_per_s", "jax_over_pytorch", "device_name"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    return runs.reindex(columns=cols).sort_values(["batch_size", "nproc_per_node", "variant"]).round(3) \
        .reset_index(drop=True)


def speedup_curves(runs: pd.DataFrame, batch_size: int | None = None) -> pd.DataFrame:
    """Every framework's speedup over devices from seed 003, plus ours, in one frame
    (framework, devices, speedup) for a single plot; each curve is of one batch size
    (named in it): the seed's at ours when we measured one that it has, else 128, ours one
    curve per variant and batch size."""
    ref = dlperf()
    if batch_size is None:
        measured = set(runs["batch_size"]) if not runs.empty else set()
        batch_size = max(measured & set(ref["batch_size"]), default=128)
    curves = ref[(ref["batch_size"] == batch_size) & ref["speedup"].notna()]
    curves = curves.assign(framework=curves["framework"] + f" (V100, seed 003, batch {batch_size})")
    out = [curves[["framework", "devices", "speedup"]]]
    if not runs.empty:
        curve = ["variant", "batch_size"]
        scaled = runs.groupby(curve).filter(lambda g: g["nproc_per_node"].nunique() > 1)
        ours = scaled.dropna(subset=["speedup"]).groupby([*curve, "nproc_per_node"],
                                                         as_index=False)["speedup"].median()
        out.append(pd.DataFrame({"framework": "PyTorch here, " + ours["variant"] + ", batch "
                                 + ours["batch_size"].astype(str),
                                 "devices": ours["nproc_per_node"], "speedup": ours["speedup"]}))
    return pd.concat(out, ignore_index=True)


def conclusions(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "No framework-comparison runs yet (notebook 40)."
    parts = []
    parts += fastest_variants(runs[is_baseline(runs)])
    for _, r in runs[~is_baseline(runs)].dropna(subset=["speedup"]).iterrows():
        parts.append(f"- {r['variant']} on {r['nproc_per_node']} devices: speedup "
                     f"{r['speedup']:.2f}x{speedup_of_text(r['speedup_of'])}, "
                     f"efficiency {r['efficiency']:.0%}.")
    ref = dlperf()
    py = ref[(ref["framework"] == "PyTorch") & (ref["batch_size"] == 128)].set_index("devices")
    of = ref[(ref["framework"] == "OneFlow") & (ref["batch_size"] == 128)].set_index("devices")
    parts.append(f"- Seed 003 (PyTorch 1.6, V100, batch 128): 8 GPUs gave {py.loc[8, 'speedup']:.2f}x "
                 f"({py.loc[8, 'efficiency']:.0%}), 32 GPUs {py.loc[32, 'speedup']:.1f}x "
                 f"({py.loc[32, 'efficiency']:.0%}); OneFlow on the same machines "
                 f"{of.loc[32, 'speedup']:.1f}x on 32 ({of.loc[32, 'efficiency']:.0%}).")
    if runs["mfu"].isna().all():
        parts.append("- MFU is unknown here: no published peak for this device (never invented).")
    else:
        top = runs.loc[runs["mfu"].idxmax()]
        parts.append(f"- Highest MFU: {top['mfu']:.1%} ({top['variant']}, {top['device_name']}).")
    parts.append(_jax_sentence(runs))
    parts += repeat_spread.sentences(spreads(runs), SPREAD_SHOWN)
    if set(runs["image_size"]) != {224} or set(runs["model"]) != {"resnet50"}:
        parts.append("- Some runs are not ResNet-50 at 224px: compare their scaling, not their "
                     "samples/s, with the published rows.")
    if startup := startup_sentence(runs):
        parts.append(f"- {startup}")
    return "\n".join(parts)


def fastest_variants(one: pd.DataFrame) -> list[str]:
    """Per work (model, data, image size, batch, hardware) measured in two or more
    variants: the fastest by median samples/s and the next one. Variants of different
    work are never ranked against each other (a 64px row is not faster than a 224px one)."""
    out = []
    for _, group in one.groupby([k for k in SAME_WORK if k != "variant"], sort=True):
        medians = group.groupby("variant")["samples_per_s"].median().sort_values(ascending=False)
        if len(medians) < 2:
            continue
        r = group.iloc[0]
        out.append(f"- Fastest variant on one device for {r['model']}, batch {r['batch_size']}, "
                   f"{r['image_size']}px, {r['dataset']}: **{medians.index[0]}**, "
                   f"{medians.iloc[0]:,.1f} samples/s (median); next {medians.index[1]}, "
                   f"{medians.iloc[1]:,.1f} ({len(medians)} variants of the same work).")
    return out


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
            f"took {measured['jax_compile_s'].median():.1f} s.{_timed_apart(measured)}")


def _timed_apart(measured: pd.DataFrame) -> str:
    """A caveat for rows whose two figures were not timed the same way: JAX records from
    before `timing` waited after every step, PyTorch's only at the end of the window."""
    def column(name: str, before: str) -> pd.Series:
        values = measured[name] if name in measured else pd.Series(index=measured.index)
        return values.astype(object).where(values.notna(), before)

    apart = int((column("jax_timing", "per_step") != column("timing", "window")).sum())
    if not apart:
        return ""
    return (f" In {apart} of these row(s) JAX waited after every step and PyTorch only at the "
            "end of its window: that ratio understates JAX wherever queuing steps overlaps them.")


def is_resnet(model: str) -> bool:
    """A ResNet, the study's question: benchlib's, torchvision's or timm's."""
    return "resnet" in str(model).lower()


def _what(run: pd.Series) -> str:
    """'resnet18 64px, batch 8, synthetic, fp32' (a language model: its tokens, not px)."""
    seq = metric(run, "seq_len")
    size = f"{int(seq)} tokens" if seq else f"{value(run, 'image_size')}px"
    return (f"{value(run, 'model')} {size}, batch {value(run, 'batch_size')}, "
            f"{value(run, 'dataset')}, {value(run, 'variant')}")


def headline(runs: pd.DataFrame) -> tuple[list[Claim], str]:
    """ResNet rows first (the study's question), on one device (samples/s and MFU), then
    on several (speedup over the same work on one); models of one's own after them."""
    if runs.empty:
        return [], ""
    one, more = [], []
    base = is_baseline(runs)
    for _, group in runs.groupby(SAME_WORK, sort=False, dropna=False):
        for run in rows(group):
            resnet_first = not is_resnet(value(run, "model"))
            if base[run.name]:
                mfu = metric(run, "mfu")
                note = f"MFU {mfu:.1%}" if mfu is not None else \
                    "MFU unknown: no published peak for this device"
                device = device_text([run]) or value(run, "device")
                order = (resnet_first, value(run, "dataset") != "synthetic",
                         value(run, "variant") != "fp32", _what(run))
                one.append((order, Claim(f"{_what(run)} on 1 {device}",
                                         samples_figure(run, "repeats"), note)))
                continue
            figure = ratio_figure(run, runs, "over 1 device", "repeats")
            more.append(((resnet_first, _what(run)), Claim(
                f"{_what(run)} on {value(run, 'nproc_per_node')} x {device_text([run])}",
                figure or samples_figure(run, "repeats"),
                "" if figure else "no 1-device run of the same work to compare with")))
    claims = [c for _, c in sorted(one, key=lambda oc: oc[0])] + \
        [c for _, c in sorted(more, key=lambda oc: oc[0])]
    if not runs["model"].map(is_resnet).any():
        claims[0].note = "; ".join(filter(None, [claims[0].note, "no ResNet row: the "
                                                 "study's question is not answered here"]))
    return claims, joined_caveats(shared_cores_caveat(runs), above_linear_caveat(runs),
                                  startup_sentence(runs))


def figure(records: Records):
    """Every framework's speedup over devices (seed 003's and ours) on one plot."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    curves = speedup_curves(runs(records.df))
    fig, ax = plt.subplots()
    sns.lineplot(data=curves, x="devices", y="speedup", hue="framework", marker="o", ax=ax)
    ax.plot([1, 32], [1, 32], color="grey", linestyle=":", label="linear")
    ax.set(xscale="log", yscale="log",
           title="ResNet speedup over devices (seed 003 rows: ResNet-50)",
           xlabel="devices (log)", ylabel="speedup over 1 device (x, log)")
    return fig


def section(records: Records):
    """The table, the spreads of rows measured both ways, and the sentences."""
    fw_runs = runs(records.df)
    yield table(fw_runs)
    fw_spreads = spreads(fw_runs)
    if not fw_spreads.empty:
        yield fw_spreads.round(3)
    yield conclusions(fw_runs)
