"""What an export says of a record, whatever the target: its figures (each numeric metric,
its median with the 95% interval where the record has one, else the p10-p90 spread, or a
share's low-high over one run's steps, each named as what it is and never passed off as
an interval, and n), a row's figures over its records, the testbed as text fields, and a
figure's unit."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from benchlib.compare.bmf import BOUNDS, benchmark_name
from benchlib.compare.sets import row_params
from benchlib.records import results

# the parts core.stats.summarize and core.throughput add beside a figure `X`: folded into
# X, not figures of their own
PARTS = ("_p10", "_p90", "_min", "_max", "_ci95_low", "_ci95_high", "_ci95_coverage", "_low", "_high",
         "_n")
# what a figure's bounds are (compare/bmf.py's BOUNDS, in the order a record's are taken)
CI95, SPREAD, STEPS = "ci95", "p10_p90", "low_high"
WORDS = {CI95: "95% CI", SPREAD: "p10-p90 spread", STEPS: "low-high over one run's steps"}


def number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Figure:
    """A metric as exported: `value` its median (or its one value), `low`-`high` its 95%
    interval (`bounds` CI95), its p10-p90 spread (SPREAD: too few launches for an
    interval), a share's low-high over one run's steps (STEPS), or none (`bounds` None);
    `n` the values behind it where known."""

    name: str
    value: float
    low: float | None = None
    high: float | None = None
    bounds: str | None = None
    n: int | None = None

    def bounds_text(self) -> str:
        """'95% CI a-b, n=5', 'p10-p90 spread a-b (no interval: n=3)', or ''."""
        if self.bounds is None:
            return ""
        n = f"n={self.n}" if self.n is not None else "n unknown"
        text = f"{WORDS[self.bounds]} {self.low:.4g}-{self.high:.4g}"
        return f"{text}, {n}" if self.bounds == CI95 else f"{text} (no interval: {n})"


def _base(name: str, metrics: dict[str, Any]) -> bool:
    """Whether `name` is a figure of its own, not a part of another's spread."""
    return not any(name.endswith(p) and name[: -len(p)] in metrics for p in PARTS)


def figures(metrics: dict[str, Any]) -> list[Figure]:
    """A record's figures, by name: every finite number among its metrics that is not
    a part of another's spread (true/false and text are not figures)."""
    out = []
    for name in sorted(metrics):
        value = metrics[name]
        if not number(value) or not _base(name, metrics):
            continue
        n = metrics.get(f"{name}_n")
        n = int(n) if number(n) else None
        for kind, (low, high) in BOUNDS.items():
            bounds = metrics.get(name + low), metrics.get(name + high)
            if all(map(number, bounds)):
                out.append(Figure(name, float(value), float(bounds[0]), float(bounds[1]), kind, n))
                break
        else:
            out.append(Figure(name, float(value), n=n))
    return out


def rows(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each row's name -> its records, in order. A row is a table and its parameters as
    compare matches them (where the data lives left out); it is named by the table and
    the parameters that vary among the table's rows here (compare/bmf.py spells them),
    as compare and notebook 90 name rows: a record holds every parameter of its study."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        key = (r["table"], json.dumps(row_params(r), sort_keys=True, default=str))
        groups.setdefault(key, []).append(r)
    varying: dict[str, set[str]] = {}
    for table in {t for t, _ in groups}:
        params = [row_params(recs[0]) for (t, _), recs in groups.items() if t == table]
        names = {k for p in params for k in p}
        varying[table] = {k for k in names if len({json.dumps(p.get(k), sort_keys=True,
                                                               default=str) for p in params}) > 1}
    return {benchmark_name(t, {k: v for k, v in row_params(recs[0]).items() if k in varying[t]}):
            recs for (t, _), recs in groups.items()}


def row_figures(records: list[dict[str, Any]]) -> list[Figure]:
    """One row's figures: a lone record's own; over several records (launches, as
    `sweep --force` adds them and compare counts them), each figure's median over them
    with the median's 95% interval from 6 or more, else their p10-p90 spread
    (core.stats.summarize)."""
    if len(records) == 1:
        return figures(records[0]["metrics"])
    from benchlib.core.stats import summarize

    values: dict[str, list[float]] = {}
    for r in records:
        for f in figures(r["metrics"]):
            values.setdefault(f.name, []).append(f.value)
    out = []
    for name, vals in sorted(values.items()):
        s = summarize(vals, name)
        if number(s[f"{name}_ci95_low"]):
            out.append(Figure(name, s[name], s[f"{name}_ci95_low"], s[f"{name}_ci95_high"], CI95,
                              len(vals)))
        else:
            out.append(Figure(name, s[name], s[f"{name}_p10"], s[f"{name}_p90"], SPREAD, len(vals)))
    return out


def testbed(record: dict[str, Any]) -> dict[str, str]:
    """The testbed as text: its name and id, the hardware a speedup's baseline must share
    (devices; CPU; host), and each field of its identity that is known (torch, cuda,
    cudnn, nccl, benchlib, commit, allocator, ...)."""
    bed = record["testbed"]
    out = {"name": bed["name"], "id": bed["id"],
           "hardware": results.hardware(record.get("env") or {}, bed)}
    out.update({k: str(v) for k, v in (bed.get("identity") or {}).items() if v is not None})
    return out


# a figure's unit by the end of its name, the first that fits
UNITS = (("tokens_per_s", "tokens/s"), ("samples_per_s", "samples/s"), ("_per_device", "samples/s"),
         ("_gbps", "GB/s"), ("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes"), ("_mb", "MB"),
         ("_gb", "GB"), ("j_per_sample", "J/sample"), ("mfu", "fraction of peak"),
         ("efficiency", "fraction"), ("speedup", "x"))


def unit(name: str) -> str:
    """`samples_per_s` -> samples/s, `step_s` -> s, ...; '' where the name does not say."""
    return next((u for end, u in UNITS if name.endswith(end) or name == end.strip("_")), "")
