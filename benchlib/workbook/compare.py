"""Two result sets side by side: did an upgrade, a new node type or a new setting make
anything slower? (`python -m benchlib compare BASE NEW`, notebook 95.)

Rows are matched by study and parameters (where the data lives is left out of the
match). For each metric with a direction (samples_per_s up, step_s down, ...) a row
gets before and after (medians), the ratio new / base, and a bootstrap 95% interval of
that ratio from the per-repeat values the records keep (`details.repeats` or
`details.epochs`), resampled as launches first, then values within each launch: each
record of the row in the set is a launch (`sweep --force --label SAME` adds one), and
notebook 30's epochs are grouped by the launch (`repeat`) they came from. With fewer
than 5 values on a side there is no interval: the range of possible ratios is shown
with n, and the verdict is inconclusive.

The verdict is on speed (new performance / base: the ratio for a metric where higher is
better, its inverse where lower is): `slower` when the whole interval lies below
1 / (1 + threshold), `faster` when above 1 + threshold, `no change` when inside both,
`inconclusive` when it crosses a boundary, with too few values, or with one launch on a
side: repeats inside one process share its luck, and on a shared machine whole launches
of one setup drift far apart (README, "Did an upgrade make anything slower?").
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.workbook import results
from benchlib.workbook.compare_stats import (MIN_LAUNCHES, MIN_VALUES, RESAMPLES, Ratio,
                                             ratio_interval, verdict)
from benchlib.errors import UsageError

# +1: higher is better; -1: lower is better. Metrics without a direction are not compared.
DIRECTIONS = {
    "samples_per_s": +1, "samples_per_s_per_device": +1, "jax_samples_per_s": +1,
    "speedup": +1, "efficiency": +1, "mfu": +1, "busbw_gbps": +1, "algbw_gbps": +1,
    "step_s": -1, "batch_s": -1, "epoch_s": -1, "data_s": -1, "compute_s": -1,
    "total_s": -1, "launch_s": -1, "recovery_s": -1, "prep_s": -1, "allreduce_latency_s": -1,
}
# A row's metric when none is asked for: the first of these it has.
PRIMARY = ("samples_per_s", "busbw_gbps", "recovery_s", "total_s", "prep_s")
# Parameters that say where things are, not what is measured: left out of the match.
LOCATION_PARAMS = ("path", "val_path", "results_dir", "checkpoints_path", "train_dir")
DEFAULT_THRESHOLD = 0.10  # README, "Did an upgrade make anything slower?"
VERDICTS = ("slower", "inconclusive", "no change", "faster")


def parse_threshold(text: str | float) -> float:
    """`5%` or `0.05` -> 0.05."""
    value = str(text).strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        number = math.nan
    if not 0 < number < 1:
        raise UsageError(f"threshold: {text!r} must be a percentage like 5% or a fraction "
                         "like 0.05, above 0 and below 100%")
    return number


# ------------------------------------------------------------------------ result sets

@dataclass
class ResultSet:
    label: str
    where: Path  # the results folder it was read from
    records: list[dict[str, Any]]  # its ok records
    note: str = ""  # how it was chosen, when that is not obvious

    def describe(self) -> str:
        beds = sorted({r["testbed"]["name"] for r in self.records})
        when = sorted(r["finished_at"][:10] for r in self.records)
        span = when[0] if when[0] == when[-1] else f"{when[0]}..{when[-1]}"
        return (f"{self.label} ({len(self.records)} ok records on {', '.join(beds)}, "
                f"{span}){self.note}")


def set_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result sets among `records`, newest first: label, records, ok, testbeds, last."""
    sets: dict[str, dict[str, Any]] = {}
    for r in records:
        s = sets.setdefault(r["label"], {"label": r["label"], "records": 0, "ok": 0,
                                         "testbeds": set(), "last": ""})
        s["records"] += 1
        s["ok"] += r["status"] == "ok"
        s["testbeds"].add(r["testbed"]["name"])
        s["last"] = max(s["last"], r["finished_at"])
    return sorted(sets.values(), key=lambda s: s["last"], reverse=True)


def _labels_line(records: list[dict[str, Any]]) -> str:
    sets = set_summary(records)
    if not sets:
        return "there are no records"
    return "result sets here: " + ", ".join(f"{s['label']} ({s['ok']} ok)" for s in sets)


class _Reader:
    """Each results folder read once (a broken file is warned about once)."""

    def __init__(self):
        self.cache: dict[Path, list[dict[str, Any]]] = {}

    def __call__(self, folder: Path) -> list[dict[str, Any]]:
        folder = Path(folder).resolve()
        if folder not in self.cache:
            self.cache[folder] = results.read_records(folder)
        return self.cache[folder]


def open_set(spec: str, results_dir: Path, read: _Reader | None = None) -> ResultSet:
    """A label in `results_dir`, or a folder: an outputs folder (its results/) or a
    results folder, whose newest result set is taken when it holds several."""
    read = read or _Reader()
    path = Path(spec).expanduser()
    if path.is_dir():
        folder = path / "results" if (path / "results").is_dir() else path
        records = read(folder)
        sets = set_summary(records)
        if not sets:
            raise UsageError(f"{spec}: no records in {folder}")
        note = (f" (newest of {len(sets)} result sets in {folder}; name one as a label with "
                f"--outputs {path})" if len(sets) > 1 else "")
        label = sets[0]["label"]
    else:
        folder = Path(results_dir)
        records = read(folder)
        label, note = spec, ""
        if not any(r["label"] == spec for r in records):
            raise UsageError(f"{spec}: no result set with that label in {folder}, and no such "
                             f"folder; {_labels_line(records)}")
    chosen = [r for r in records if r["label"] == label and r["status"] == "ok"]
    if not chosen:
        raise UsageError(f"{spec}: result set {label} has no ok record")
    return ResultSet(label, folder.resolve(), chosen, note)


def default_pair(results_dir: Path) -> tuple[str, str] | None:
    """(base, new) labels when none are given: the newest set, and the newest older set
    that shares a row with it. None when no two sets share a row."""
    records = [r for r in results.read_records(results_dir) if r["status"] == "ok"]
    sets = [s["label"] for s in set_summary(records)]
    keys = {label: {row_key(r) for r in records if r["label"] == label} for label in sets}
    for i, new in enumerate(sets):
        for base in sets[i + 1:]:
            if keys[new] & keys[base]:
                return base, new
    return None


# ------------------------------------------------------------------------------- rows

def row_params(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record["params"].items() if k not in LOCATION_PARAMS}


def row_key(record: dict[str, Any]) -> str:
    """What a row is across testbeds: its study and parameters, wherever the data lives."""
    return json.dumps({"study": record["study"], "params": row_params(record)},
                      sort_keys=True, default=str)


def _per_repeat(record: dict[str, Any], metric: str) -> tuple[str, list[dict[str, Any]]]:
    """(where, items): the record's per-repeat items that all hold `metric`."""
    details = record.get("details") or {}
    for key in ("repeats", "epochs"):
        items = details.get(key)
        if isinstance(items, list) and items and all(isinstance(i, dict) and metric in i
                                                       for i in items):
            return key, items
    return "summary", [record["metrics"]] if metric in record["metrics"] else []


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def launches(record: dict[str, Any], metric: str) -> list[list[float]]:
    """The metric's values in the record, one list per launch: its per-repeat values
    (details.repeats, else details.epochs), else its one summary value. Epochs that name
    their `repeat` came from one launch each (notebook 30 launches every repeat)."""
    where, items = _per_repeat(record, metric)
    groups: dict[Any, list[float]] = {}
    for item in items:
        launch = item.get("repeat", 0) if where == "epochs" else 0
        if _number(item[metric]):
            groups.setdefault(launch, []).append(float(item[metric]))
    return [g for g in groups.values() if g]


def values(record: dict[str, Any], metric: str) -> list[float]:
    """All of the record's values of `metric` (launches() flattened)."""
    return [v for g in launches(record, metric) for v in g]


# ------------------------------------------------------------------------ comparison

@dataclass
class Comparison:
    base: ResultSet
    new: ResultSet
    threshold: float
    rows: Any  # pandas DataFrame, one row per (row, metric), slowest first
    only_base: int  # rows only one side has
    only_new: int
    env_diff: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def slower(self):
        return self.rows[self.rows["verdict"] == "slower"]

    def exit_code(self) -> int:
        """1 when any row is slower beyond the threshold with confidence, else 0."""
        return 1 if len(self.slower) else 0


def _describe_rows(records: list[dict[str, Any]]) -> dict[str, str]:
    """row key -> the parameters that tell the study's compared rows apart."""
    by_study: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_study.setdefault(r["study"], {})[row_key(r)] = row_params(r)
    out = {}
    for rows in by_study.values():
        names = sorted({k for p in rows.values() for k in p})
        varying = [n for n in names if len({repr(p.get(n)) for p in rows.values()}) > 1]
        for key, p in rows.items():
            out[key] = ", ".join(f"{n}={p.get(n)}" for n in varying) or "(one row)"
    return out


def _group(records: list[dict[str, Any]], where: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(row_key(r), []).append(r)
    for key, recs in groups.items():
        beds = sorted({r["testbed"]["id"] for r in recs})
        if len(beds) > 1:
            raise UsageError(f"result set {where} holds row {recs[0]['study']} "
                             f"{json.dumps(row_params(recs[0]), sort_keys=True)} from "
                             f"{len(beds)} testbeds ({', '.join(beds)}): give each testbed "
                             "its own label")
    return groups


def compare(base: ResultSet, new: ResultSet, threshold: float = DEFAULT_THRESHOLD,
            metrics: Iterable[str] | None = None, studies: Iterable[str] | None = None,
            resamples: int = RESAMPLES) -> Comparison:
    """Match the two sets' rows and compare each metric; UsageError on bad input."""
    import pandas as pd

    if base.label == new.label and base.where == new.where:
        raise UsageError(f"BASE and NEW are both result set {base.label}: compare two "
                         "different sets")
    studies = list(studies or [])
    if studies:
        known = sorted({r["study"] for r in base.records + new.records})
        unknown = [s for s in studies if s not in known]
        if unknown:
            raise UsageError(f"study: {unknown[0]!r} is in neither set; studies: "
                             f"{', '.join(known)}")
    pick = (lambda rs: [r for r in rs if r["study"] in studies]) if studies else list
    b_rows = _group(pick(base.records), base.label)
    n_rows = _group(pick(new.records), new.label)
    common = sorted(set(b_rows) & set(n_rows))
    if not common:
        def studies_of(rows):
            return ", ".join(sorted({json.loads(k)["study"] for k in rows})) or "none"
        raise UsageError(f"no rows in common: {base.label} has studies {studies_of(b_rows)}, "
                         f"{new.label} has {studies_of(n_rows)} (none with the same parameters)")
    metrics = list(metrics or [])
    if "all" in metrics:
        metrics = list(DIRECTIONS)
    unknown = [m for m in metrics if m not in DIRECTIONS]
    if unknown:
        raise UsageError(f"metric: {unknown[0]!r} has no direction to compare; metrics: all, "
                         f"{', '.join(DIRECTIONS)}")
    names = _describe_rows([r for k in common for r in b_rows[k] + n_rows[k]])
    out = []
    for key in common:
        b_recs, n_recs = b_rows[key], n_rows[key]
        wanted = metrics or [next((m for m in PRIMARY if _has(b_recs, m) and _has(n_recs, m)),
                                  None)]
        for metric in wanted:
            if metric is None or not (_has(b_recs, metric) and _has(n_recs, metric)):
                continue
            b_vals = [g for r in b_recs for g in launches(r, metric)]
            n_vals = [g for r in n_recs for g in launches(r, metric)]
            if statistics.median([v for g in b_vals for v in g]) <= 0:
                continue
            r = ratio_interval(b_vals, n_vals, resamples)
            up = DIRECTIONS[metric] > 0
            speed, s_lo, s_hi = (r.ratio, r.low, r.high) if up else (
                1 / r.ratio, None if r.high is None else 1 / r.high,
                None if r.low is None else 1 / r.low)
            out.append({
                "study": b_recs[0]["study"], "row": names[key], "metric": metric,
                "base": statistics.median([v for g in b_vals for v in g]),
                "new": statistics.median([v for g in n_vals for v in g]),
                "ratio": r.ratio, "ci95_low": r.low, "ci95_high": r.high,
                "range_low": r.range_low, "range_high": r.range_high,
                "n_base": r.n_base, "n_new": r.n_new,
                "launches": f"{len(b_vals)}/{len(n_vals)}",
                "values_from": _per_repeat(b_recs[0], metric)[0],
                "speed": speed, "speed_low": s_lo, "speed_high": s_hi,
                "verdict": verdict(s_lo, s_hi, threshold, min(len(b_vals), len(n_vals))),
                "why": _why(r, s_lo, s_hi, threshold, min(len(b_vals), len(n_vals))),
                "key": key,
            })
    if not out:
        asked = ", ".join(metrics) if metrics else "a primary metric (" + ", ".join(PRIMARY) + ")"
        raise UsageError(f"metric: no row common to both sets has {asked} on both sides")
    rows = pd.DataFrame(out)
    rows["order"] = rows["verdict"].map({v: i for i, v in enumerate(VERDICTS)})
    rows = rows.sort_values(["order", "speed"]).drop(columns="order").reset_index(drop=True)
    return Comparison(base, new, threshold, rows, len(set(b_rows) - set(n_rows)),
                      len(set(n_rows) - set(b_rows)), env_diff(base.records, new.records))


def _why(r: Ratio, low: float | None, high: float | None, threshold: float,
         n_launches: int) -> str:
    """Why a comparison is inconclusive ('' when it is not)."""
    if r.low is None:
        return f"n<{MIN_VALUES}"
    if n_launches < MIN_LAUNCHES:
        return "1 launch"
    return "spans threshold" if verdict(low, high, threshold, n_launches) == "inconclusive" else ""


def _has(records: list[dict[str, Any]], metric: str) -> bool:
    return any(values(r, metric) for r in records)


def compare_sets(base: str, new: str, results_dir: str | Path = "outputs/results",
                 threshold: float | str = DEFAULT_THRESHOLD, metrics: Iterable[str] | None = None,
                 studies: Iterable[str] | None = None) -> Comparison:
    """`compare()` from two labels or folders; both empty: the newest set against the
    newest older one that shares a row with it (default_pair)."""
    from benchlib import paths

    results_dir = paths.resolve(results_dir)
    if not base and not new:
        pair = default_pair(results_dir)
        if pair is None:
            raise UsageError(f"no two result sets share a row in {results_dir}; "
                             f"{_labels_line(results.read_records(results_dir))}")
        base, new = pair
    if not base or not new:
        raise UsageError("base, new: give both, or neither (the two newest sets)")
    read = _Reader()
    return compare(open_set(base, results_dir, read), open_set(new, results_dir, read),
                   parse_threshold(threshold), metrics, studies)


# ------------------------------------------------------------------ environment diff

# per-job values that differ on every run and say nothing about the testbed
_NOISY_VARS = ("SLURM_", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE")


def environment(record: dict[str, Any]) -> dict[str, str]:
    """What a record says about where it ran, flat: the testbed's identity and hosts,
    then driver, OS, Python, threads, memory, package versions and set variables."""
    env = record.get("env") or {}
    bed = record["testbed"]
    flat: dict[str, Any] = {f"testbed {k}": v for k, v in bed["identity"].items()}
    flat["hosts"] = bed.get("hosts")
    flat.update({
        "gpus": ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "none",
        "driver": env.get("nvidia_driver"), "os": env.get("os"), "kernel": env.get("kernel"),
        "python": env.get("python"), "cpus": env.get("cpu_logical"),
        "cpus usable": env.get("cpu_affinity"), "torch threads": env.get("torch_threads"),
        "memory": (f"{env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes")
                   else None),
        "method_version": record.get("method_version"),
    })
    for name, version in sorted((env.get("packages") or {}).items()):
        if name not in ("torch", "benchlib"):  # the testbed has them
            flat[f"package {name}"] = version
    for name, value in sorted((env.get("env_vars") or {}).items()):
        if not name.startswith(_NOISY_VARS):
            flat[f"${name}"] = value
    return {k: "-" if v is None else str(v) for k, v in flat.items()}


def env_diff(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(what, base, new) for everything that differs between the two sets' records (a set
    with several values shows them all)."""
    def values_of(records):
        out: dict[str, set[str]] = {}
        for r in records:
            for k, v in environment(r).items():
                out.setdefault(k, set()).add(v)
        return out

    b, n = values_of(base), values_of(new)
    diff = []
    for name in list(dict.fromkeys([*b, *n])):
        before, after = ", ".join(sorted(b.get(name, {"-"}))), ", ".join(sorted(n.get(name, {"-"})))
        if before != after:
            diff.append((name, before, after))
    return diff
