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
MIN_VALUES = 5  # DESIGN.md, "How a number is taken" 4: an interval only from 5+ values
# A verdict needs launches on both sides: repeats inside one process share its luck (on
# this shared machine whole launches of one setup ran 2x apart; README).
MIN_LAUNCHES = 2
DEFAULT_THRESHOLD = 0.10  # README, "Did an upgrade make anything slower?"
RESAMPLES = 2000
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


# ---------------------------------------------------------------------- statistics

@dataclass
class Ratio:
    ratio: float  # new median / base median
    low: float | None  # 95% bootstrap interval of the ratio; None with too few values
    high: float | None
    range_low: float  # the smallest and largest ratio of any two values
    range_high: float
    n_base: int
    n_new: int


def _boot_medians(groups: list[list[float]], rng, resamples: int):
    """Bootstrap medians: values resampled within one launch; with several launches
    (records), launches first, then values within each."""
    import numpy as np

    if len(groups) == 1:
        a = np.asarray(groups[0])
        return np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    lens = np.array([len(g) for g in groups])
    padded = np.full((len(groups), lens.max()), np.nan)
    for i, g in enumerate(groups):
        padded[i, :len(g)] = g
    picked = rng.integers(0, len(groups), (resamples, len(groups)))  # launches, resampled
    size = lens[picked][..., None]  # then each picked launch's values, as many as it has
    slot = np.arange(lens.max())
    within = (rng.random((resamples, len(groups), lens.max())) * size).astype(int)
    drawn = np.where(slot < size, padded[picked[..., None], within], np.nan)
    return np.nanmedian(drawn.reshape(resamples, -1), axis=1)


def ratio_interval(base: list[list[float]], new: list[list[float]], resamples: int = RESAMPLES,
                   seed: int = 0) -> Ratio:
    """new / base of the medians, with a seeded bootstrap 95% percentile interval when
    both sides have at least MIN_VALUES values. `base`, `new`: values per record."""
    import numpy as np

    flat_b = [v for g in base for v in g]
    flat_n = [v for g in new for v in g]
    ratio = statistics.median(flat_n) / statistics.median(flat_b)
    low = high = None
    if min(len(flat_b), len(flat_n)) >= MIN_VALUES:
        rng = np.random.default_rng(seed)
        boot = _boot_medians(new, rng, resamples) / _boot_medians(base, rng, resamples)
        low, high = (float(q) for q in np.percentile(boot, [2.5, 97.5]))
    return Ratio(ratio, low, high, min(flat_n) / max(flat_b), max(flat_n) / min(flat_b),
                 len(flat_b), len(flat_n))


def verdict(speed_low: float | None, speed_high: float | None, threshold: float,
            n_launches: int = MIN_LAUNCHES) -> str:
    """slower / faster / no change / inconclusive for a speed interval (new / base
    performance, > 1 faster); None bounds (too few values), or fewer than MIN_LAUNCHES
    launches on the side with fewest, are inconclusive."""
    if speed_low is None or speed_high is None or n_launches < MIN_LAUNCHES:
        return "inconclusive"
    if speed_high < 1 / (1 + threshold):
        return "slower"
    if speed_low > 1 + threshold:
        return "faster"
    if speed_low >= 1 / (1 + threshold) and speed_high <= 1 + threshold:
        return "no change"
    return "inconclusive"


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


# ------------------------------------------------------------------------- showing it

def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def interval_text(row: Any) -> str:
    """`0.81-0.84`, or `n=3/3 <5, range 0.75-0.92`."""
    if row["ci95_low"] is None or (isinstance(row["ci95_low"], float) and math.isnan(row["ci95_low"])):
        return (f"n={row['n_base']}/{row['n_new']} <{MIN_VALUES}, range "
                f"{row['range_low']:.3f}-{row['range_high']:.3f}")
    return f"{row['ci95_low']:.3f}-{row['ci95_high']:.3f}"


def change_text(speed: float) -> str:
    pct = (speed - 1) * 100
    return f"{abs(pct):.1f}% {'faster' if pct >= 0 else 'slower'}"


def table(comparison: Comparison):
    """The rows as people read them (a DataFrame)."""
    import pandas as pd

    rows = comparison.rows
    return pd.DataFrame({
        "study": rows["study"], "row": rows["row"], "metric": rows["metric"],
        "base": rows["base"].map(_num), "new": rows["new"].map(_num),
        "ratio": rows["ratio"].map(lambda x: f"{x:.3f}"),
        "95% interval": [interval_text(r) for _, r in rows.iterrows()],
        "change": rows["speed"].map(change_text),
        "n (launches)": [f"{a}/{b} ({launched})" for a, b, launched in
                         zip(rows["n_base"], rows["n_new"], rows["launches"])],
        "verdict": [f"{v} ({why})" if why else v for v, why in zip(rows["verdict"], rows["why"])],
    })


def env_table(comparison: Comparison):
    import pandas as pd

    return pd.DataFrame(comparison.env_diff, columns=["what", comparison.base.label,
                                                      comparison.new.label])


def sentences(comparison: Comparison) -> list[str]:
    """What the comparison says, computed from it."""
    c, rows = comparison, comparison.rows
    t = f"{c.threshold:.0%}" if c.threshold * 100 == round(c.threshold * 100) else f"{c.threshold:.1%}"
    counts = rows["verdict"].value_counts()
    out = [f"{c.new.label} against {c.base.label}: {rows['key'].nunique()} rows in common, "
           f"{len(rows)} comparisons at a {t} threshold: "
           + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + "."]
    for verdict_name in ("slower", "faster"):
        hits = rows[rows["verdict"] == verdict_name]
        if len(hits):
            listed = "; ".join(f"{r.study} {r.row} {r.metric} {change_text(r.speed)} "
                               f"(speed {r.speed_low:.3f}-{r.speed_high:.3f})"
                               for r in hits.itertuples())
            out.append(f"{verdict_name.capitalize()} beyond {t} with 95% confidence: {listed}.")
    if not len(rows[rows["verdict"] == "slower"]):
        out.append(f"No row is slower beyond {t} with 95% confidence.")
    single = rows[rows["why"] == "1 launch"]
    if len(single):
        out.append(f"{len(single)} comparison(s) come from one launch on a side: their interval "
                   "shows the spread inside that launch only, not how far launches of one setup "
                   "drift apart, so they get no verdict; add a launch with `sweep --force "
                   "--label SAME`.")
    few = rows[rows["ci95_low"].isna()]
    if len(few):
        out.append(f"{len(few)} comparison(s) have fewer than {MIN_VALUES} values on a side "
                   "(no interval, only the range; inconclusive): give those rows repeats >= "
                   f"{MIN_VALUES}, or rerun them into the same set with --force.")
    if c.env_diff:
        shown = "; ".join(f"{w} {b} -> {a}" for w, b, a in c.env_diff[:8])
        more = f" and {len(c.env_diff) - 8} more" if len(c.env_diff) > 8 else ""
        out.append(f"What changed between the sets: {shown}{more}.")
    else:
        out.append("The records show no difference in testbed or environment: a change is "
                   "noise, or something the records do not capture.")
    if c.only_base or c.only_new:
        out.append(f"Not compared: {c.only_base} row(s) only in {c.base.label}, {c.only_new} "
                   f"only in {c.new.label}.")
    return out


def text_report(comparison: Comparison) -> str:
    """What `benchlib compare` prints: the sets, the table, what changed, the verdict."""
    c = comparison
    lines = [f"base: {c.base.describe()}", f"new:  {c.new.describe()}", ""]
    lines += table(c).to_string(index=False).splitlines()
    lines.append("")
    if c.env_diff:
        lines.append("what changed:")
        width = max(len(w) for w, _, _ in c.env_diff)
        lines += [f"  {w:<{width}}  {b} -> {a}" for w, b, a in c.env_diff]
        lines.append("")
    lines += sentences(c)[:1] + [s for s in sentences(c)[1:] if not s.startswith("What changed")]
    return "\n".join(lines)


def forest_plot(comparison: Comparison, ax=None):
    """Speed (new / base performance) per comparison with its 95% interval; hollow
    markers with a thin line: too few values, the range instead. The band is the
    threshold."""
    import matplotlib.pyplot as plt

    rows = comparison.rows
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    colors = {"slower": "#b2182b", "faster": "#2166ac", "no change": "#4d4d4d",
              "inconclusive": "#999999"}
    t = comparison.threshold
    ax.axvspan(1 / (1 + t), 1 + t, color="#eeeeee", zorder=0)
    ax.axvline(1, color="#666666", lw=0.8)
    labels = []
    for y, r in enumerate(rows.itertuples()):
        labels.append(f"{r.study} {r.row} ({r.metric})")
        color = colors[r.verdict]
        if r.speed_low is None or math.isnan(r.speed_low):
            lo, hi = sorted((r.range_low, r.range_high) if DIRECTIONS[r.metric] > 0
                            else (1 / r.range_high, 1 / r.range_low))
            ax.plot([lo, hi], [y, y], color=color, lw=0.8, ls=":")
            ax.plot([r.speed], [y], "o", mfc="white", color=color)
        else:
            ax.plot([r.speed_low, r.speed_high], [y, y], color=color, lw=2)
            ax.plot([r.speed], [y], "o", color=color)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"speed, {comparison.new.label} / {comparison.base.label} (>1: faster)")
    ax.set_title(f"Changes with 95% intervals; band: ±{t:.0%} threshold")
    return ax


def trend(results_dir: str | Path, key: str, metric: str):
    """One row's metric in every result set that has it, oldest first: median, the 95%
    interval of the median (5+ values) or the range, n."""
    import numpy as np
    import pandas as pd

    from benchlib import paths

    by_set: dict[str, list[dict[str, Any]]] = {}
    for r in results.read_records(paths.resolve(results_dir)):
        if r["status"] == "ok" and row_key(r) == key:
            by_set.setdefault(r["label"], []).append(r)
    out = []
    for label, recs in by_set.items():
        groups = [g for r in recs for g in launches(r, metric)]
        vals = sorted(v for g in groups for v in g)
        if not vals:
            continue
        if len(vals) >= MIN_VALUES:  # resampled as compare() does: launches, then values
            boot = _boot_medians(groups, np.random.default_rng(0), RESAMPLES)
            low, high = (float(q) for q in np.percentile(boot, [2.5, 97.5]))
        else:
            low, high = vals[0], vals[-1]
        out.append({"label": label, "finished_at": max(r["finished_at"] for r in recs),
                    "testbed": recs[0]["testbed"]["name"], metric: statistics.median(vals),
                    "low": low, "high": high, "n": len(vals), "launches": len(groups),
                    "interval": "95% CI" if len(vals) >= MIN_VALUES else "range"})
    return pd.DataFrame(out).sort_values("finished_at").reset_index(drop=True) if out else \
        pd.DataFrame(columns=["label", "finished_at", "testbed", metric, "low", "high", "n",
                              "launches", "interval"])


def most_changed(comparison: Comparison) -> tuple[str, str]:
    """(row key, metric) of the comparison that moved most: the trend worth looking at."""
    rows = comparison.rows
    i = (rows["speed"].map(math.log).abs()).idxmax()
    return rows.loc[i, "key"], rows.loc[i, "metric"]


def trend_plot(history, metric: str, key: str, ax=None):
    """The trend() table as points with their interval (or range), one per result set."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.2))
    if history.empty:
        ax.set_title("no result set has this row")
        return ax
    x = range(len(history))
    ax.errorbar(x, history[metric], yerr=[history[metric] - history["low"],
                                          history["high"] - history[metric]],
                fmt="o-", capsize=4, color="#2166ac")
    ax.set_xticks(list(x), [f"{r.label}\n{r.interval}, n={r.n}\n{r.launches} launch(es)"
                            for r in history.itertuples()], fontsize=8)
    row = json.loads(key)
    params = ", ".join(f"{k}={v}" for k, v in sorted(row["params"].items()))
    ax.set_title(f"{row['study']}: {metric} across result sets", fontsize=10)
    ax.set_ylabel(metric)
    ax.text(0, -0.42, params, transform=ax.transAxes, fontsize=7, va="top", wrap=True)
    return ax
