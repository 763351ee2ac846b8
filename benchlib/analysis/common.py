"""What every study's analysis shares: a study's ok runs, speedup and efficiency against
the baseline runs of the same work, a median with its spread."""

from __future__ import annotations

import pandas as pd


def ok_runs(df: pd.DataFrame, notebook: str, marker: str, ints: tuple[str, ...]) -> pd.DataFrame:
    """The ok runs of one notebook (none when no record has its `marker` parameter), with
    the integer columns typed back (a frame of mixed studies holds them as floats)."""
    if df.empty or marker not in df:
        return pd.DataFrame()
    runs = df[(df["notebook"] == notebook) & (df["status"] == "ok")]
    runs = runs.astype({c: int for c in ints}).copy() if not runs.empty else runs.copy()
    return with_hardware(runs)


def with_hardware(runs: pd.DataFrame) -> pd.DataFrame:
    """`hardware`, what a baseline must share with a run: the device model and count, the
    CPU model and the host (`results.load_results` writes it; a frame without it gets it
    from its `gpu`, `cpu` and `host` columns, or "?" for what it lacks)."""
    if runs.empty or "hardware" in runs:
        return runs
    parts = [runs[c].fillna("cpu" if c == "gpu" else "?").astype(str) if c in runs else "?"
             for c in ("gpu", "cpu", "host")]
    return runs.assign(hardware=parts[0] + "; " + parts[1] + "; " + parts[2])


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


def spread(median: float, p10: float, p90: float) -> str:
    return f"{median:.3g} ({p10:.3g}-{p90:.3g})"
