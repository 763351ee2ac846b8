"""The single_device_io study (notebook 10, `benchlib io`): throughput against DataLoader
workers and storage variants, seed 000's conclusion table, and the sentences they
support; its headline, main figure and notebook 90's section, all from `runs()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from benchlib.analysis.claims import (
    Claim,
    label,
    metric,
    ratio_figure,
    rows,
    samples_figure,
    value,
    work_text,
)
from benchlib.analysis.common import (
    STEADY,
    WHOLE_EPOCH,
    comparable_rate,
    spread,
    startup_sentence,
    with_columns,
    with_ratio,
    work_keys,
)
from benchlib.analysis.sides import compare, faster, side
from benchlib.config import studies
from benchlib.reference import SEED000_RAW_OVER_PRELOAD

if TYPE_CHECKING:
    from benchlib.analysis.sections import Records

STUDY = studies.of_analysis(__name__).name  # its name, written once: the registry
ABOUT = ("Throughput against DataLoader workers, per data set and storage variant (bars span "
         "p10-p90 of the repeats); traverse against train per variant, shaped like seed 000's "
         "conclusion table: seconds for the run's epochs, median (p10-p90), fewest workers.")
# what runs must share to be pooled or compared: the device (its model on CPU too), the
# model trained, how much data (samples) and the torch that ran it, epochs and batch
SETUP = ["device_name", "model", "samples", "torch", "epochs", "batch_size"]
KEYS = [*SETUP, "dataset", "variant", "mode"]
# the same work: what the knobs (variant, num_workers) are ranked within
SAME_WORK = [*SETUP, "dataset", "mode"]
KNOBS = ["variant", "num_workers"]
# a shard row's (notebook 10's wds, litdata, mds): where they are read from and how
SHARD_KNOBS = ["store", "link_mibps", "link_latency_ms", "shard_mb", "prefetch_factor", "cache"]
INT_PARAMS = ("num_workers", "epochs", "batch_size", "repeats", "warmup_steps")


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of the single-device IO study (notebook 10 and `benchlib io`), or, given
    the per-repeat frame of `results.load_details`, those runs' repeats."""
    if df.empty:
        return df
    io = df[df["study"] == STUDY] if "study" in df else df.iloc[0:0]
    if "status" in io:
        io = io[io["status"] == "ok"]
    io = io.astype({c: int for c in INT_PARAMS if c in io}).copy()  # .copy(): one block
    # records without a setup field pool only with each other (groupby drops NaN keys)
    io = io.assign(**{c: io[c].fillna("?") if c in io else "?" for c in SETUP})
    return with_rates(with_columns(io, [*SAME_WORK, *KNOBS, *SHARD_KNOBS, "link"]))


def with_rates(io: pd.DataFrame) -> pd.DataFrame:
    """`rate`, what the knobs are ranked by: samples/s, or where any run of the same work
    (SAME_WORK) has a steady rate that hides its start-up, every run's whole-epoch rate
    (`rate_of` says which; common.comparable_rate): no ratio is taken from a steady rate
    that hides start-up. `over_slowest` and its columns (common.with_ratio): each run's
    rate over that of the slowest run of its work, the headline's ratio."""
    if io.empty or "samples_per_s" not in io:
        return io
    rate, whole = comparable_rate(io, SAME_WORK)
    io = io.assign(rate=rate, rate_of=whole.map({True: WHOLE_EPOCH, False: STEADY}))
    return with_ratio(io, SAME_WORK, is_slowest(io), "over_slowest")


def is_slowest(io: pd.DataFrame) -> pd.Series:
    """The baseline of the headline's ratio: per work (SAME_WORK), its slowest run with a
    rate (of equals, the last)."""
    measured = io[io["rate"].notna()]
    last_first = measured.iloc[::-1]
    slowest = last_first["rate"].groupby(work_keys(last_first, SAME_WORK), sort=False).idxmin()
    return pd.Series(io.index.isin(slowest.to_numpy()), index=io.index)


def workers_swept(io: pd.DataFrame) -> pd.DataFrame:
    """Only the settings that were run with more than one num_workers, labelled."""
    swept = io.groupby(KEYS).filter(lambda g: g["num_workers"].nunique() > 1)
    return swept.assign(setting=swept["variant"] + " " + swept["mode"])


def variants_compared(io: pd.DataFrame) -> pd.DataFrame:
    """The fewest-workers runs of data sets measured with more than one variant."""
    fewest = io[io["num_workers"] == io.groupby(KEYS)["num_workers"].transform("min")]
    return fewest.groupby("dataset").filter(lambda g: g["variant"].nunique() > 1)


# how seed_table's column names a setup value that differs between the runs shown
SETUP_LABELS = {"model": "{}", "samples": "{} samples", "torch": "torch {}",
                "batch_size": "batch {}"}


def seed_table(io: pd.DataFrame) -> pd.DataFrame:
    """Shaped like seed 000's conclusion: seconds for the run's epochs, median (p10-p90),
    one row per variant, one column per (dataset, mode) and setup; the fewest workers of
    each. A column names the device and epochs, and any other SETUP value (samples, model,
    batch, torch) that differs between runs of its data set and mode: runs differing only
    in data size are two columns, never two values for one cell."""
    if io.empty:
        return pd.DataFrame()
    fewest = _fewest_workers(io, KEYS)
    column = (fewest["dataset"] + ", " + fewest["mode"] + " ("
              + fewest["epochs"].astype(int).astype(str) + " ep, s, " + fewest["device_name"])
    for key, form in SETUP_LABELS.items():  # named where it varies within (dataset, mode)
        varies = fewest.groupby(["dataset", "mode"])[key].transform("nunique") > 1
        named = fewest[key].map(lambda v, form=form: ", " + form.format(
            f"{v:.0f}" if isinstance(v, float) and v.is_integer() else v))
        column = column + named.where(varies, "")
    cells = fewest.assign(
        column=column + ")",
        cell=[spread(m, lo, hi) for m, lo, hi in
              zip(fewest["total_s"], fewest["total_s_p10"], fewest["total_s_p90"])])
    # one cell per (variant, column) by construction: every KEYS value but the variant is
    # in the column (constant or named), and _fewest_workers left one row per KEYS
    return cells.pivot(index="variant", columns="column", values="cell").fillna("")


def best_workers(io: pd.DataFrame) -> pd.DataFrame:
    """Per setup and (dataset, variant, mode) swept over num_workers: the fastest, and each
    setting's speed relative to it. Runs of the same setting (from several studies)
    count as one, by their median."""
    cols = [*KEYS, "num_workers", "samples_per_s", "others", "rate_of"]
    per_setting = workers_swept(io).groupby([*KEYS, "num_workers", "rate_of"], as_index=False)[
        "rate"].median()
    rows = []
    for key, group in per_setting.groupby(KEYS):
        best = group.loc[group["rate"].idxmax()]
        others = ", ".join(f"{int(w)} workers {sps / best['rate']:.2f}x"
                           for w, sps in zip(group["num_workers"], group["rate"])
                           if w != best["num_workers"])
        rows.append([*key, int(best["num_workers"]), best["rate"], others, best["rate_of"]])
    return pd.DataFrame(rows, columns=cols)


def _fewest_workers(io: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per setting of `keys`, the runs with the fewest workers, one row each (medians)."""
    fewest = io[io["num_workers"] == io.groupby(keys)["num_workers"].transform("min")]
    return fewest.groupby(keys, as_index=False)[["total_s", "total_s_p10", "total_s_p90",
                                                 "samples_per_s"]].median()


def raw_over_preload(io: pd.DataFrame, dataset: str = "fashion-mnist",
                     mode: str = "traverse") -> dict[tuple, float]:
    """Per setup (SETUP's values): how many times longer `raw` takes than
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


def conclusions(io: pd.DataFrame) -> str:
    """Sentences computed from the IO records, in Markdown."""
    if io.empty:
        return "No single-device IO runs yet (notebook 10, `python -m benchlib io`)."
    parts = []
    for _, b in best_workers(io).iterrows():
        whole = " over the whole epoch, start-up included" if b["rate_of"] == WHOLE_EPOCH else ""
        parts.append(f"- **{b['dataset']}**, {b['variant']} {b['mode']} on {b['device_name']}: "
                     f"fastest with **num_workers={b['num_workers']}** "
                     f"({b['samples_per_s']:,.0f} samples/s{whole}; {b['others']}).")
    for mode in ("traverse", "train"):
        for setup, ratio in raw_over_preload(io, mode=mode).items():
            parts.append(_ratio_line(io, mode, dict(zip(SETUP, setup)), ratio))
    devices = ", ".join(sorted(set(io["device_name"].dropna())))
    sources = ", ".join(sorted(set(io["data_source"].dropna())))
    parts.append(f"- Measured on {devices}; data: {sources}.")
    if startup := startup_sentence(io):
        parts.append(f"- {startup}")
    return "\n".join(parts)


DECODED_ON_DISK = ("np_memmap", "tensorclass_memmap")  # decoded once, read from storage


def _ratio_line(io: pd.DataFrame, mode: str, setup: dict, ratio: float) -> str:
    """raw against preload (seconds for the run's epochs, fewest workers, with interval),
    seed 000's ratio beside it in traverse mode, and what the records say costs."""
    sides = _sides(io, mode, setup)
    text = (f"- FashionMNIST {mode} on {setup['device_name']} ({setup['epochs']} ep): "
            f"{compare(sides['preload'], sides['raw'], higher_is_better=False)}; raw takes "
            f"**{ratio:.1f}x** as long as preload")
    if mode == "traverse":  # a reference figure, from other hardware: beside, not judged
        text += (f"; reference: seed 000 measured {SEED000_RAW_OVER_PRELOAD:.1f}x on a "
                 "GTX 1050 (another machine and data path, so no verdict is drawn from it)")
    return text + "." + _decoding_line(sides)


def _sides(io: pd.DataFrame, mode: str, setup: dict) -> dict:
    """Each variant's fewest-workers runs of FashionMNIST in `mode` on one setup, as
    verdict sides of total seconds (several runs: one value each; one: its repeats)."""
    rows = io[(io["dataset"] == "fashion-mnist") & (io["mode"] == mode)]
    rows = rows[(rows[SETUP] == pd.Series(setup)).all(axis=1)]
    rows = rows[rows["num_workers"] == rows.groupby(KEYS)["num_workers"].transform("min")]
    return {v: side(v, g, "total_s", "repeats") for v, g in rows.groupby("variant")}


def _decoding_line(sides: dict) -> str:
    """Said only when the records show it: preload clearly faster than raw, and a variant
    holding decoded arrays on storage clearly faster than raw too."""
    if faster(sides["preload"], sides["raw"], higher_is_better=False) != "preload":
        return ""
    stored = [v for v in DECODED_ON_DISK
              if v in sides and faster(sides[v], sides["raw"], higher_is_better=False) == v]
    if not stored:
        return ""
    pre = sides["preload"].median
    times = ", ".join(f"{v} {sides[v].median / pre:.1f}x" for v in stored)
    return (f" Decoded arrays read from storage take {times} preload's time against raw's "
            f"{sides['raw'].median / pre:.1f}x: decoding each item every epoch, not reading "
            "from storage, is what costs.")


def headline(io: pd.DataFrame) -> tuple[list[Claim], str]:
    """Per work (data set, mode, model, batch, device, ...): the fastest setting of the
    knobs that were swept, and how many times the slowest one it is (`over_slowest`)."""
    measured = io[io["rate"].notna()] if not io.empty else io
    claims = []
    for _, group in measured.groupby(work_keys(measured, SAME_WORK), sort=False):
        ranked = sorted(rows(group), key=lambda r: -metric(r, "rate"))
        best, worst = ranked[0], ranked[-1]
        named = KNOBS + (SHARD_KNOBS if any(value(r, "link") for r in ranked) else [])
        knobs = [k for k in named if len({repr(value(r, k)) for r in ranked}) > 1] or KNOBS
        where = f"{value(best, 'dataset')} {value(best, 'mode')}, " + \
            work_text(best, ("model", "", "batch_size"))
        if value(best, "link"):  # a shard row: its format, store and link, in words
            where += f", {value(best, 'variant')} shards from {value(best, 'link')}"
        if len(ranked) == 1:
            claims.append(Claim(f"{where}: {label(best, knobs)}", samples_figure(best, "repeats")))
            continue
        claims.append(Claim(f"{where}: fastest {label(best, knobs)}",
                            samples_figure(best, "repeats")))
        claims.append(Claim(f"{where}: {label(best, knobs)} against the slowest, "
                            f"{label(worst, knobs)}",
                            ratio_figure(best, io, "the samples/s", "repeats",
                                         "over_slowest")))
    return claims, startup_sentence(measured)


def figure(records: Records):
    """Throughput against DataLoader workers, per data set and setting (bars p10-p90);
    without a sweep over workers, seconds per repeat by storage variant."""
    repeats = runs(records.details("repeats"))
    swept = workers_swept(repeats) if not repeats.empty else repeats
    if swept.empty:
        return _variants_figure(repeats)
    import seaborn as sns

    grid = sns.catplot(data=swept, x="num_workers", y="samples_per_s", hue="setting",
                       col="dataset", kind="point", errorbar=("pi", 80), sharey=False,
                       height=3.2, aspect=1.3)
    grid.set_axis_labels("num_workers", "samples/s")
    grid.figure.suptitle("Throughput against DataLoader workers (bars: p10-p90)", y=1.04)
    return grid


def _variants_figure(repeats: pd.DataFrame):
    """Seconds per repeat by storage variant (traverse and train), or None."""
    compared = variants_compared(repeats) if not repeats.empty else repeats
    if compared.empty:
        return None
    import seaborn as sns

    grid = sns.catplot(data=compared, x="variant", y="total_s", hue="mode", col="dataset",
                       kind="bar", errorbar=("pi", 80), height=3.4, aspect=1.8)
    grid.set(yscale="log")
    grid.set_axis_labels("", "seconds, all epochs of a repeat (log)")
    grid.tick_params(axis="x", rotation=20)
    grid.figure.suptitle("Time per repeat by storage variant (bars: p10-p90)", y=1.04)
    return grid


def section(records: Records):
    """Seconds per repeat by storage variant (where the main figure is the workers'),
    seed 000's table, and the sentences."""
    repeats = runs(records.details("repeats"))
    if not repeats.empty and not workers_swept(repeats).empty:
        variants = _variants_figure(repeats)
        if variants is not None:
            yield variants
    io = runs(records.df)
    yield seed_table(io)
    yield conclusions(io)
    from benchlib.analysis import io_pipeline

    if not io_pipeline.runs(io).empty:  # the input pipeline's rows: shards, a store, a link
        yield io_pipeline.table(io)
        yield "\n".join(io_pipeline.one_knob(io))
