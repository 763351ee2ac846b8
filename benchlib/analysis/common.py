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


def hides_startup(runs: pd.DataFrame) -> pd.Series:
    """Each run whose steady rate hides its start-up (the record's `startup_hidden`: more
    than STARTUP_GAP times its whole-epoch rate)."""
    if "startup_hidden" not in runs:
        return pd.Series(False, index=runs.index)
    epoch = runs["epoch_samples_per_s"] if "epoch_samples_per_s" in runs else \
        pd.Series(float("nan"), index=runs.index)
    return runs["startup_hidden"].eq(True) & epoch.notna()


def with_speedup(runs: pd.DataFrame, same_work: list[str], baseline: pd.Series,
                 devices: str) -> pd.DataFrame:
    """speedup = median samples/s of a run / median of the baseline runs doing the same
    work (same values of `same_work`); efficiency = speedup / devices. No baseline: NaN.
    Where any run of the work has a steady rate that hides its start-up, the work's
    speedups are of whole-epoch rates (`speedup_of`: steady or whole epoch): no speedup is
    taken from a steady rate that hides a start-up."""
    runs = with_columns(runs, same_work)  # a key a record lacks: None, one group
    keys = runs[same_work].astype(str)  # None and NaN alike, and groupby keeps them
    whole = hides_startup(runs).groupby([keys[k] for k in same_work],
                                        dropna=False).transform("any").astype(bool)
    rate = runs["samples_per_s"].where(~whole, runs.get("epoch_samples_per_s"))
    base = rate[baseline].groupby([keys[k] for k in same_work]).median()
    per_run = pd.Series([base.get(tuple(k), float("nan")) for k in keys.itertuples(index=False)],
                        index=runs.index, dtype=float)
    runs = runs.assign(speedup=rate / per_run, speedup_of=whole.map({True: WHOLE_EPOCH,
                                                                     False: STEADY}))
    count = runs[devices] if devices in runs else ranks(runs)
    return runs.assign(efficiency=runs["speedup"] / count)


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
    worst = hidden.loc[(hidden["samples_per_s"] / hidden["epoch_samples_per_s"]).idxmax()]
    return (f"{len(hidden)} run(s) spent so long starting that the steady rate hides it (e.g. "
            f"{worst['run_id']}: {worst['samples_per_s']:,.0f} samples/s steady, "
            f"{worst['epoch_samples_per_s']:,.0f} over the whole epoch): speedups of their work "
            "are of whole-epoch rates, start-up included.")


def spread(median: float, p10: float, p90: float) -> str:
    return f"{median:.3g} ({p10:.3g}-{p90:.3g})"


SHARED_CORES = ("Several ranks on one CPU share its cores: the ratios say what launching and "
                "all-reducing cost here, not what more devices would give.")


def ranks(runs: pd.DataFrame) -> pd.Series:
    """How many ranks (or DataParallel devices) each run used."""
    out = pd.Series(1.0, index=runs.index)
    for col in ("nproc_per_node", "devices", "world_size"):  # the last one known wins
        if col in runs:
            out = pd.to_numeric(runs[col], errors="coerce").where(lambda s: s > 0).fillna(out)
    return out


def shared_cores_caveat(runs: pd.DataFrame) -> str:
    """The caveat, only where a run shows its cause: several ranks on one CPU (notebook 90
    and the report's landing page say it from here)."""
    if runs.empty or "device_name" not in runs:
        return ""
    on_cpu = runs["device_name"].astype(str).eq("cpu")
    return SHARED_CORES if (on_cpu & (ranks(runs) > 1)).any() else ""
