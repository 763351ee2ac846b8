"""The landing page's numbers: a figure (a value, its spread and n, and the records it came
from), a claim built of figures, and the helpers the per-study headlines share (labels,
ratios between runs of the same work, caveats). Pure functions over record dicts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from benchlib.analysis import common
from benchlib.records import results

Record = dict[str, Any]

# parameters shown as their value alone in a run's label ("preload traverse"), the rest
# as name=value ("num_workers=2")
BARE = ("dataset", "variant", "mode", "model", "arch", "strategy", "trainer", "launcher",
        "precision")


@dataclass
class Figure:
    """One number on the page and the runs it came from ("" the run, or a role such as
    "baseline")."""

    value: str
    what: str = ""
    spread: tuple[str, str] | None = None  # p10, p90 as shown
    n: str = ""
    sources: list[tuple[str, Record]] = field(default_factory=list)

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


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def _fmt(value: float) -> str:
    """Three significant figures, thousands separated: 12,300 / 45.6 / 0.123."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    return f"{round(value, digits):,.{digits}f}"


def metric(rec: Record, name: str) -> float | None:
    return number((rec.get("metrics") or {}).get(name))


def spread_unit(rec: Record, unit: str) -> str:
    """What a run's spread is over: `unit` (its study's: epochs, repeats), or launches
    where each launch was one sample (`repeat_mode: process`)."""
    return "launches" if (rec.get("params") or {}).get("repeat_mode") == "process" else unit


def _n(rec: Record, name: str, unit: str) -> str:
    count = metric(rec, f"{name}_n")
    return f"n={int(count)} {spread_unit(rec, unit)}" if count else ""


def samples_figure(rec: Record, unit: str) -> Figure | None:
    """A run's median samples/s with its p10-p90 over `unit`s (repeats, epochs)."""
    sps = metric(rec, "samples_per_s")
    if sps is None:
        return None
    lo, hi = metric(rec, "samples_per_s_p10"), metric(rec, "samples_per_s_p90")
    spread = (_fmt(lo), _fmt(hi)) if lo is not None and hi is not None else None
    return Figure(_fmt(sps), "samples/s", spread,
                  _n(rec, "samples_per_s", unit), [("", rec)])


def ratio_figure(rec: Record, base: Record, what: str, unit: str) -> Figure | None:
    """samples/s of `rec` over those of `base`; the spread pairs p10 with p90 (the widest
    the two spreads allow), n counts both runs' samples."""
    a, b = metric(rec, "samples_per_s"), metric(base, "samples_per_s")
    if not a or not b:
        return None
    a10, a90 = metric(rec, "samples_per_s_p10"), metric(rec, "samples_per_s_p90")
    b10, b90 = metric(base, "samples_per_s_p10"), metric(base, "samples_per_s_p90")
    spread = (f"{a10 / b90:.2f}", f"{a90 / b10:.2f}") if a10 and a90 and b10 and b90 else None
    na, nb = metric(rec, "samples_per_s_n"), metric(base, "samples_per_s_n")
    ua, ub = spread_unit(rec, unit), spread_unit(base, unit)
    n = "" if not (na and nb) else f"n={int(na)} {ua} each" if (na, ua) == (nb, ub) \
        else f"n={int(na)} and {int(nb)} {ua}" if ua == ub \
        else f"n={int(na)} {ua} and {int(nb)} {ub}"
    return Figure(f"{a / b:.2f}x", what, spread, n, [("", rec), ("baseline", base)])


def varying_params(records: list[Record]) -> list[str]:
    names = sorted({k for r in records for k in r["params"]})
    return [n for n in names if len({repr(r["params"].get(n)) for r in records}) > 1]


def label(rec: Record, names: list[str]) -> str:
    parts = []
    for name in names:
        value = rec["params"].get(name)
        parts.append(str(value) if name in BARE else f"{name}={value}")
    return " ".join(parts)


def same_work(records: list[Record], keys: tuple[str, ...]) -> dict[tuple, list[Record]]:
    groups: dict[tuple, list[Record]] = {}
    for rec in records:
        groups.setdefault(tuple(repr(rec["params"].get(k)) for k in keys), []).append(rec)
    return groups


def device_text(records: list[Record]) -> str:
    names = sorted({str((r.get("metrics") or {}).get("device_name")) for r in records
                    if (r.get("metrics") or {}).get("device_name")})
    return ", ".join(names)


def shared_cores_caveat(records: list[Record]) -> str:
    """The caveat notebook 90 gives (analysis.common), over the same frame of records."""
    return common.shared_cores_caveat(results.frame(records))


def ranks_of(rec: Record) -> float:
    """How many ranks (or DataParallel devices) a run used."""
    m = rec.get("metrics") or {}
    return number(m.get("world_size")) or number(m.get("devices")) or \
        number(rec["params"].get("nproc_per_node")) or 1


def above_linear_caveat(claims: list[Claim]) -> str:
    """The caveat, only where the records show it: a ratio over a baseline that is more
    than the ratio of their ranks, with the threads per rank each ran, when they differ."""
    odd = []
    for claim in claims:
        fig = claim.figure
        if fig is None or [role for role, _ in fig.sources] != ["", "baseline"]:
            continue
        run, base = fig.sources[0][1], fig.sources[1][1]
        ranks = ranks_of(run) / ranks_of(base)
        a, b = metric(run, "samples_per_s"), metric(base, "samples_per_s")
        if a and b and ranks > 1 and a / b > ranks * 1.05:
            odd.append((fig, run, base, ranks))
    if not odd:
        return ""
    fig, run, base, ranks = odd[0]
    text = (f"{len(odd)} of these ratios exceed the rank count (e.g. {fig.value} with "
            f"{ranks:g}x the ranks): more than linear is not what more ranks give")
    mine, theirs = metric(run, "threads_per_rank"), metric(base, "threads_per_rank")
    if mine and theirs and mine != theirs:
        text += (f"; the baseline ran {theirs:g} threads per rank and this run {mine:g}, and "
                 "threads that compete for cores (other load, oversubscription) slow a run down")
    return text + ". Rerun both on an idle machine before reading them as scaling."


def joined_caveats(*texts: str) -> str:
    return " ".join(t for t in texts if t)
