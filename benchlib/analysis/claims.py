"""A study's headline as claims: a figure (a value, its spread p10-p90 and n, and the run
ids it came from), a claim built of one, and the helpers the per-study headlines share
(labels, the work a run did, a ratio as its study's frame holds it).

Formatting only: every number a claim shows is read from a row of the study's frame
(`runs()`, over `results.frame`, what `load_results` gives notebook 90), where
benchlib.analysis.common computed it (a speedup, its spread and baselines: `with_ratio`).
The report's landing page and notebook 90's findings call the same functions
(analysis/findings.py) over the same frame. A row's value is read with `value()`, which
gives the same answer whether the frame holds one study or every study (where a
parameter another study lacks is NaN, and its integer column floats)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchlib.analysis.common import WHOLE_EPOCH, hides_startup, projected, whole_epoch_rate

# parameters shown as their value alone in a run's label ("preload traverse"), the rest
# as name=value ("num_workers=2")
BARE = ("dataset", "variant", "mode", "model", "arch", "strategy", "trainer", "launcher",
        "precision")

Row = pd.Series  # one run: a row of the records' frame


@dataclass
class Figure:
    """One number and the runs it came from: (role, run id), the role "" for the run
    itself, or one such as "baseline"."""

    value: str
    what: str = ""
    spread: tuple[str, str] | None = None  # p10, p90 as shown
    n: str = ""
    sources: list[tuple[str, str]] = field(default_factory=list)

    def text(self) -> str:
        extra = [f"p10-p90 {self.spread[0]}-{self.spread[1]}"] if self.spread else []
        extra += [self.n] if self.n else []
        return " ".join(filter(None, [self.value, self.what])) + \
            (f" ({', '.join(extra)})" if extra else "")


@dataclass
class Claim:
    """"<subject>: <figure>; <note>", e.g. "DDP via torchrun on 2 gloo ranks: 1.13x over
    one process (p10-p90 1.11-1.16, n=2 epochs each)"."""

    subject: str
    figure: Figure | None = None
    note: str = ""

    def text(self) -> str:
        out = self.subject + (f": {self.figure.text()}" if self.figure else "")
        return out + (f"; {self.note}" if self.note else "")


def value(row: Row, name: str) -> Any:
    """A row's value of `name` as its record held it: None where the record had none (a
    missing column, NaN), a plain Python value (not numpy's), an integral float as the
    int it was before a frame of mixed studies made its column float."""
    v = row.get(name) if name in row.index else None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()  # numpy scalar
    if isinstance(v, float):
        return None if math.isnan(v) else int(v) if v.is_integer() else v
    return v


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(v) else float(v)


def metric(row: Row, name: str) -> float | None:
    return number(value(row, name))


def fmt(v: float) -> str:
    """Three significant figures, thousands separated: 12,300 / 45.6 / 0.123."""
    if v == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
    return f"{round(v, digits):,.{digits}f}"


def spread_unit(row: Row, unit: str) -> str:
    """What a run's spread is over: `unit` (its study's: epochs, repeats), or launches
    where each launch was one sample (`repeat_mode: process`)."""
    return "launches" if value(row, "repeat_mode") == "process" else unit


def _n(row: Row, name: str, unit: str) -> str:
    count = metric(row, f"{name}_n")
    return f"n={int(count)} {spread_unit(row, unit)}" if count else ""


WHOLE_EPOCH_NOTE = "whole-epoch rates, start-up included: a steady rate hides it"


def samples_figure(row: Row, unit: str) -> Figure | None:
    """A run's median samples/s with its p10-p90 over `unit`s (repeats, epochs); where it
    hides the run's start-up, the whole-epoch rate beside it."""
    sps = metric(row, "samples_per_s")
    if sps is None:
        return None
    lo, hi = metric(row, "samples_per_s_p10"), metric(row, "samples_per_s_p90")
    spread = (fmt(lo), fmt(hi)) if lo is not None and hi is not None else None
    what = "samples/s"
    one = row.to_frame().T
    if hides_startup(one).iloc[0]:  # the frames' rule, for this one run
        epoch = "a whole epoch of its data set (projected)" if projected(one).iloc[0] \
            else "the whole epoch"
        what = (f"samples/s steady, {fmt(float(whole_epoch_rate(one).iloc[0]))} over {epoch}: "
                "the steady rate hides the start-up")
    return Figure(fmt(sps), what, spread, _n(row, "samples_per_s", unit), [("", row["run_id"])])


def ratio_figure(row: Row, runs: pd.DataFrame, what: str, unit: str,
                 name: str = "speedup") -> Figure | None:
    """The run's ratio over the baselines of its work as the study's frame holds it
    (common.with_ratio's `name` columns: the ratio, its spread, what rates it is of and the
    baselines' run ids, looked up in `runs` for their n), or None where it has none.
    Whole-epoch rates are said so, with their spread and n over epochs."""
    ratio = metric(row, name)
    if ratio is None:
        return None
    ids = [i for i in str(value(row, f"{name}_baselines") or "").split(",") if i]
    by_id = {r["run_id"]: r for r in rows(runs[runs["run_id"].isin(ids)])}
    bases = [by_id[i] for i in ids if i in by_id]
    sources = [("", row["run_id"]), *(("baseline", i) for i in ids)]
    whole = value(row, f"{name}_of") == WHOLE_EPOCH
    low, high = metric(row, f"{name}_p10"), metric(row, f"{name}_p90")
    spread = (f"{low:.2f}", f"{high:.2f}") if low is not None and high is not None else None
    n = "" if not bases else _pair_n(row, bases[0], unit, whole) if len(bases) == 1 \
        else _many_n(row, bases, unit, whole)
    return Figure(f"{ratio:.2f}x", f"{what} ({WHOLE_EPOCH_NOTE})" if whole else what, spread, n,
                  sources)


def _count(row: Row, unit: str, whole: bool) -> tuple[float | None, str]:
    """(how many values a run's compared rate is over, of what): a whole-epoch rate's
    epochs, else its samples/s's (epochs, repeats or launches)."""
    if whole:
        return number(float(whole_epoch_rate(row.to_frame().T, "_n").iloc[0])), "epochs"
    return metric(row, "samples_per_s_n"), spread_unit(row, unit)


def _pair_n(row: Row, base: Row, unit: str, whole: bool = False) -> str:
    """'n=12 epochs each', 'n=3 and 5 epochs', 'n=3 launches and 12 epochs' ('' unknown)."""
    (na, ua), (nb, ub) = _count(row, unit, whole), _count(base, unit, whole)
    return "" if not (na and nb) else f"n={int(na)} {ua} each" if (na, ua) == (nb, ub) \
        else f"n={int(na)} and {int(nb)} {ua}" if ua == ub \
        else f"n={int(na)} {ua} and {int(nb)} {ub}"


def _many_n(row: Row, bases: list[Row], unit: str, whole: bool = False) -> str:
    """'n=12 epochs; 2 baselines, 12+12 epochs' ('' where a count is unknown)."""
    (na, ua), counted = _count(row, unit, whole), [_count(b, unit, whole) for b in bases]
    if not na or not all(n for n, _ in counted):
        return ""
    units = {u for _, u in counted}
    return (f"n={int(na)} {ua}; {len(bases)} baselines, "
            + "+".join(str(int(n)) for n, _ in counted) + f" {'/'.join(sorted(units))}")


def work_text(row: Row, names: tuple[str, ...] = ("model", "dataset", "batch_size")) -> str:
    """The work a run did and where, for a claim's subject: 'resnet18 on synthetic, batch
    8, on cpu' (what the record lacks, or a name given as "", is left out)."""
    model, dataset, batch = (value(row, n) if n else None for n in (*names, "", "", "")[:3])
    device = value(row, "device_name") or value(row, "device")
    what = " on ".join(str(v) for v in (model, dataset) if v is not None)
    parts = [what, f"batch {batch}" if batch is not None else "",
             f"on {device}" if device else ""]
    return ", ".join(p for p in parts if p)


def rows(runs: pd.DataFrame) -> list[Row]:
    return [row for _, row in runs.iterrows()]


def varying(runs: pd.DataFrame, names: list[str]) -> list[str]:
    """Those of `names` whose value differs between the runs, in order."""
    return [n for n in names if len({repr(value(r, n)) for r in rows(runs)}) > 1]


def label(row: Row, names: list[str]) -> str:
    parts = []
    for name in names:
        v = value(row, name)
        parts.append(str(v) if name in BARE else f"{name}={v}")
    return " ".join(parts)


def device_text(group: list[Row]) -> str:
    names = sorted({str(value(r, "device_name")) for r in group if value(r, "device_name")})
    return ", ".join(names)


def joined_caveats(*texts: str) -> str:
    return " ".join(t for t in texts if t)


def run_metric(row: Row) -> tuple[str, str]:
    """(column name, value) that a table of runs shows for one: samples/s with spread, a
    fault run's recovery time, a data preparation's seconds."""
    if value(row, "study") == "fault_tolerance":
        v = metric(row, "recovery_s")
        return "recovery", "" if v is None else f"{v:.1f} s"
    if value(row, "study") == "data_prep":
        v = metric(row, "prep_s")
        return "prepared in", "" if v is None else f"{v:.1f} s"
    fig = samples_figure(row, "")
    if fig is None:
        return "samples/s (p10-p90)", ""
    return "samples/s (p10-p90)", fig.value + (f" ({fig.spread[0]}-{fig.spread[1]})"
                                               if fig.spread else "")
