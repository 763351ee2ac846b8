"""What every study's analysis shares: a study's ok runs, speedup and efficiency against
the baseline runs of the same work, a median with its spread."""

from __future__ import annotations

import pandas as pd


def ok_runs(df: pd.DataFrame, study: str, ints: tuple[str, ...] = ()) -> pd.DataFrame:
    """The ok runs of one study (by the record's `study`), with the integer columns it has
    typed back (a frame of mixed studies holds them as floats) and `hardware`."""
    if df.empty or "study" not in df:
        return pd.DataFrame()
    runs = df[(df["study"] == study) & (df["status"] == "ok")]
    if runs.empty:
        return runs.copy()
    runs = runs.astype({c: int for c in ints if c in runs and runs[c].notna().all()}).copy()
    return with_hardware(runs)


def model_column(runs: pd.DataFrame) -> pd.Series:
    """Each run's model: `model`, or `arch` in records from before notebook 40 named it
    so (its tables still read, with a note)."""
    model = runs["model"] if "model" in runs else pd.Series(None, index=runs.index, dtype=object)
    if "arch" in runs:
        model = model.where(model.notna(), runs["arch"])
    return model


def with_hardware(runs: pd.DataFrame) -> pd.DataFrame:
    """`hardware`, what a baseline must share with a run: the device model and count, the
    CPU model and the host (`results.load_results` writes it; a frame without it gets it
    from its `gpu`, `cpu` and `host` columns, or "?" for what it lacks)."""
    if runs.empty or "hardware" in runs:
        return runs
    parts = [runs[c].fillna("cpu" if c == "gpu" else "?").astype(str) if c in runs else "?"
             for c in ("gpu", "cpu", "host")]
    return runs.assign(hardware=parts[0] + "; " + parts[1] + "; " + parts[2])


STEADY, WHOLE_EPOCH = "steady", "whole epoch"


def _column(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name].astype(float) if name in runs else pd.Series(float("nan"), index=runs.index)


def projected(runs: pd.DataFrame) -> pd.Series:
    """Each run whose whole-epoch rate is projected for its data set's epoch (it stopped
    at max_steps short of it: core.throughput.full_epoch)."""
    return _column(runs, "full_epoch_samples_per_s").gt(0)


def whole_epoch_rate(runs: pd.DataFrame, part: str = "") -> pd.Series:
    """Each run's whole-epoch rate (`part` "": the median; "_p10", "_p90", "_n": its
    spread and count over epochs): of a whole epoch of its data set, projected where the
    run stopped short of it, else of its epoch as run. NaN where the record has none."""
    return _column(runs, f"full_epoch_samples_per_s{part}").where(
        projected(runs), _column(runs, f"epoch_samples_per_s{part}"))


WHOLE_EPOCH_RATE = "whole_epoch_samples_per_s"


def with_whole_epoch(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with WHOLE_EPOCH_RATE and its spread (`_p10`, `_p90`, `_min`, `_max`, `_n`):
    each run's `whole_epoch_rate`, for a side that compares whole-epoch rates
    (analysis/sides.side reads a single launch's min, max and n)."""
    return runs.assign(**{f"{WHOLE_EPOCH_RATE}{part}": whole_epoch_rate(runs, part)
                          for part in ("", "_p10", "_p90", "_min", "_max", "_n")})


def hides_startup(runs: pd.DataFrame) -> pd.Series:
    """Each run whose steady rate hides its start-up (the record's `startup_hidden`: more
    than STARTUP_GAP times its whole-epoch rate, of the data set's epoch where projected)."""
    if "startup_hidden" not in runs:
        return pd.Series(False, index=runs.index)
    return runs["startup_hidden"].eq(True) & whole_epoch_rate(runs).notna()


def work_keys(runs: pd.DataFrame, same_work: list[str]) -> pd.Series:
    """Each run's work as one hashable key: its values of `same_work` as text (a value the
    record lacks, None or NaN, is "None": runs without it are one work, not dropped, so a
    model without `depth` still has its speedup)."""
    values, missing = runs[same_work].to_numpy(dtype=object), runs[same_work].isna().to_numpy()
    # not astype(str): pandas 3 keeps a missing value missing there, and groupby drops it
    keys = [tuple("None" if gone else str(v) for v, gone in zip(row, lost))
            for row, lost in zip(values, missing)]
    return pd.Series(keys, index=runs.index, dtype=object)


def comparable_rate(runs: pd.DataFrame, same_work: list[str]) -> tuple[pd.Series, pd.Series]:
    """(rate, whole): the rate each run is compared by, samples/s or, where any run of the
    same work (same values of `same_work`) has a steady rate that hides its start-up, every
    such run's whole-epoch rate (`whole` True): no ratio is taken from a steady rate that
    hides a start-up."""
    if runs.empty:
        return pd.Series(dtype=float), pd.Series(dtype=bool)
    whole = hides_startup(runs).groupby(work_keys(runs, same_work)).transform("any").astype(bool)
    return runs["samples_per_s"].where(~whole, whole_epoch_rate(runs)).astype(float), whole


def with_ratio(runs: pd.DataFrame, same_work: list[str], baseline: pd.Series,
               name: str = "speedup") -> pd.DataFrame:
    """The one rule for a run against the baseline runs of the same work (same values of
    `same_work`; `baseline` says which runs are baselines, the study's own predicate):

        name            its rate (comparable_rate) over the median rate of the baselines
                        that have one; NaN where its work has none
        name_of         what the rates are: steady, or whole epoch where any run of the
                        work hides its start-up
        name_p10/_p90   its spread: the run's p10 over the baselines' highest p90 and its
                        p90 over their lowest p10 (the widest the spreads allow), of the
                        rates compared (whole-epoch ones over epochs); NaN where a p10 or
                        p90 is missing
        name_baselines  the baselines' run ids, comma-joined, in the frame's order
        name_n          how many baseline runs the median is over (0: none)

    Every table and headline reads these columns; nothing computes a ratio again."""
    runs = with_columns(runs, same_work)  # a key a record lacks: None, one group
    if runs.empty:
        return runs.assign(**{c: None for c in _ratio_columns(name)})
    work = work_keys(runs, same_work)
    rate, whole = comparable_rate(runs, same_work)
    p10, p90 = (_column(runs, f"samples_per_s{part}").where(~whole, whole_epoch_rate(runs, part))
                for part in ("_p10", "_p90"))
    bases = baseline.reindex(runs.index, fill_value=False).astype(bool) & rate.gt(0)
    per_work = {}
    for key, group in runs[bases].groupby(work[bases], sort=False):
        i = group.index
        spread = (p10[i].gt(0) & p90[i].gt(0)).all()
        per_work[key] = (rate[i].median(), ",".join(map(str, group.get("run_id", i))), len(group),
                         p10[i].min() if spread else float("nan"),
                         p90[i].max() if spread else float("nan"))
    none = (float("nan"), "", 0, float("nan"), float("nan"))
    median, ids, n, base_p10, base_p90 = (pd.Series(col, index=runs.index) for col in
                                          zip(*(per_work.get(k, none) for k in work)))
    spread = p10.gt(0) & p90.gt(0)
    return runs.assign(**{
        name: rate / median.astype(float),
        f"{name}_of": whole.map({True: WHOLE_EPOCH, False: STEADY}),
        f"{name}_p10": (p10 / base_p90.astype(float)).where(spread),
        f"{name}_p90": (p90 / base_p10.astype(float)).where(spread),
        f"{name}_baselines": ids, f"{name}_n": n.astype(int)})


def _ratio_columns(name: str) -> list[str]:
    return [name, f"{name}_of", f"{name}_p10", f"{name}_p90", f"{name}_baselines", f"{name}_n"]


def with_speedup(runs: pd.DataFrame, same_work: list[str], baseline: pd.Series,
                 devices: str) -> pd.DataFrame:
    """`with_ratio`'s speedup columns over the baselines of the same work, and efficiency
    = speedup / `devices` (the column, else each run's ranks)."""
    runs = with_ratio(runs, same_work, baseline)
    count = runs[devices] if devices in runs else ranks(runs)
    return runs.assign(efficiency=runs["speedup"] / count)


def speed_kept(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that kept a speed: an emulated float8 run (`fp8: emulated`, a CPU or a GPU
    before sm_89) keeps none, so no table of speeds, ratio or figure takes it."""
    return runs[runs["fp8"] != "emulated"] if "fp8" in runs else runs


def with_columns(runs: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`runs` with every column of `names`, None where the records have none (a record
    from before a parameter existed, a frame built by hand)."""
    missing = [n for n in names if n not in runs]
    return runs.assign(**{n: None for n in missing}).copy() if missing else runs.copy()


def speedup_of_text(of: str) -> str:
    """What a speedup was taken of, where it is not the steady rate."""
    return " (whole-epoch rates, start-up included)" if of == WHOLE_EPOCH else ""


def startup_sentence(runs: pd.DataFrame) -> str:
    """The runs whose steady rate hides a start-up, in words, where there are any (notebook
    90's sections and the report's findings say it from here)."""
    hidden = runs[hides_startup(runs)] if not runs.empty else runs
    if hidden.empty:
        return ""
    whole = whole_epoch_rate(hidden)
    worst = (hidden["samples_per_s"] / whole).idxmax()
    row = hidden.loc[worst]
    epoch = "a whole epoch of its data set, projected" if projected(hidden)[worst] \
        else "the whole epoch"
    return (f"{len(hidden)} run(s) spent so long starting that the steady rate hides it (e.g. "
            f"{row['run_id']}: {row['samples_per_s']:,.0f} samples/s steady, "
            f"{whole[worst]:,.0f} over {epoch}): speedups of their work "
            "are of whole-epoch rates, start-up included.")


def spread(median: float, p10: float, p90: float) -> str:
    return f"{median:.3g} ({p10:.3g}-{p90:.3g})"


SHARED_CORES = ("Several ranks on one CPU share its cores: the ratios say what launching and "
                "all-reducing cost here, not what more devices would give.")


def ranks(runs: pd.DataFrame) -> pd.Series:
    """How many ranks (or DataParallel devices) each run used: its world_size, else its
    devices, else nnodes x nproc_per_node (a record that lacks one: 1 of it)."""
    def known(col: str) -> pd.Series:
        values = runs[col] if col in runs else pd.Series(float("nan"), index=runs.index)
        return pd.to_numeric(values, errors="coerce").where(lambda s: s > 0)

    out = known("nnodes").fillna(1) * known("nproc_per_node").fillna(1)
    for col in ("devices", "world_size"):  # the last one known wins
        out = known(col).fillna(out)
    return out


def shared_cores_caveat(runs: pd.DataFrame) -> str:
    """The caveat, only where a run shows its cause: several ranks on one CPU (notebook 90
    and the report's landing page say it from here)."""
    if runs.empty or "device_name" not in runs:
        return ""
    on_cpu = runs["device_name"].astype(str).eq("cpu")
    return SHARED_CORES if (on_cpu & (ranks(runs) > 1)).any() else ""


def above_linear_caveat(runs: pd.DataFrame) -> str:
    """The caveat, only where the runs show it: a speedup (as shown, two decimals) more
    than 1.05 times the ratio of the run's ranks to its first baseline's, the largest such
    as the example, with the threads per rank each ran where they differ."""
    if runs.empty or "speedup_baselines" not in runs:
        return ""
    position = {run_id: i for i, run_id in enumerate(runs["run_id"])}
    first = runs["speedup_baselines"].fillna("").astype(str).str.split(",").str[0].map(position)
    known = runs["speedup"].notna() & first.notna()
    count = ranks(runs).to_numpy()
    base = pd.Series(first[known].astype(int).to_numpy(), index=runs.index[known])
    more = pd.Series(count[known.to_numpy()] / count[base.to_numpy()], index=base.index)
    shown = runs.loc[known, "speedup"].map(lambda v: float(f"{v:.2f}"))  # as a claim shows it
    odd = (more > 1) & (shown > more * 1.05)
    if not odd.any():
        return ""
    worst = (shown / more)[odd].idxmax()
    run, baseline = runs.loc[worst], runs.iloc[base[worst]]
    text = (f"{int(odd.sum())} of these ratios exceed the rank count (e.g. {shown[worst]:.2f}x "
            f"with {more[worst]:g}x the ranks): more than linear is not what more ranks give")
    mine, theirs = (r.get("threads_per_rank") for r in (run, baseline))
    if pd.notna(mine) and pd.notna(theirs) and mine and theirs and mine != theirs:
        text += (f"; the baseline ran {theirs:g} threads per rank and this run {mine:g}, and "
                 "threads that compete for cores (other load, oversubscription) slow a run down")
    return text + ". Rerun both on an idle machine before reading them as scaling."
