"""A result set read back from the Bencher Metric Format (BMF) file `benchlib export --to
bmf` writes, so that a set which survives only as what a tracker keeps can still be
compared; and the names that export gives benchmarks and measures, kept here so that the
writer (benchlib/export/bmf.py) and this reader cannot drift apart.

A benchmark is a row, `<table>: name=value, ...` (the parameters that tell the table's rows
apart, sorted; a value that would read back as another type, or holds ", ", written as
JSON), so the names read back exactly; `bencher.json` keeps each row's every parameter.
A measure is a metric in Bencher's slug spelling (`samples-per-s`); its `lower_value` and
`upper_value` are the 95% interval, or, where the record had too few launches for one,
the p10-p90 spread, and then the measure says so (`samples-per-s-p10-p90`; a share of a
step's low-high over one run's steps: `compute-share-low-high`). The testbed, commit and
result set are not BMF's (they are `bencher run` arguments): export writes them beside
the file (`bencher.json`), and this reader takes them from there when it is present.

BMF keeps one value per row and metric, not the values of each launch, so the ratio of
the two sides' medians is all a comparison can show: `compare` says n=1 and no verdict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchlib.errors import UsageError

BMF_FILE = "bmf.json"  # what export writes in its --out folder
SIDECAR = "bencher.json"  # beside it: testbed, hash, label, the rows' exact records
# what a figure's bounds can be, the names a record gives them, and the end of the name of
# a measure with such bounds: a 95% interval of the median (over 5+ independent launches),
# the p10-p90 spread (too few launches for an interval), or the low-high of a share over
# one run's steps (core/throughput.py); a measure never calls the last two an interval
BOUNDS = {"ci95": ("_ci95_low", "_ci95_high"), "p10_p90": ("_p10", "_p90"),
          "low_high": ("_low", "_high")}
MEASURE_SUFFIX = {"ci95": "", "p10_p90": "-p10-p90", "low_high": "-low-high"}
_JSON = json.JSONDecoder()


def _value_text(value: Any) -> str:
    """A parameter's value as the benchmark name spells it (read back by _read_value)."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            if ", " not in value and value == value.strip() and value:
                return value
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def benchmark_name(table: str, params: dict[str, Any]) -> str:
    """`io_workers: dataset=fashion-mnist, num_workers=0` (the row: the parameters that
    tell it apart); a table of one row is its name alone."""
    pairs = ", ".join(f"{k}={_value_text(params[k])}" for k in sorted(params))
    return f"{table}: {pairs}" if pairs else table


def _json_at(text: str, pos: int) -> tuple[Any, int]:
    """(the JSON value at `pos`, where it ends); (None, pos) where there is none."""
    try:
        return _JSON.raw_decode(text, pos)
    except ValueError:
        return None, pos


def parse_benchmark(name: str) -> tuple[str, dict[str, Any]]:
    """(table, parameters) of a benchmark_name(): each value read as JSON where it is
    one up to the next ", " (a number, true, a quoted text, a mapping), else as text."""
    table, _, rest = name.partition(": ")
    params: dict[str, Any] = {}
    pos = 0
    while pos < len(rest):
        key_end = rest.find("=", pos)
        if key_end < 0:
            raise UsageError(f"benchmark {name!r}: {rest[pos:]!r} is not name=value")
        key, pos = rest[pos:key_end], key_end + 1
        value, end = _json_at(rest, pos)
        if end != len(rest) and not rest.startswith(", ", end):  # text, up to the next ", "
            end = rest.find(", ", pos)
            end = len(rest) if end < 0 else end
            value = rest[pos:end]
        params[key] = value
        pos = end + 2
    return table, params


def measure(metric: str, bounds: str | None) -> str:
    """`samples_per_s` as Bencher's measure slug: `samples-per-s`, ending `-p10-p90` or
    `-low-high` when its bounds (BOUNDS) are not a 95% interval."""
    return metric.replace("_", "-") + MEASURE_SUFFIX.get(bounds or "ci95", "")


def parse_measure(slug: str) -> tuple[str, str]:
    """(metric, what its bounds are: a key of BOUNDS) of a measure()."""
    for kind, suffix in MEASURE_SUFFIX.items():
        if suffix and slug.endswith(suffix):
            return slug[: -len(suffix)].replace("-", "_"), kind
    return slug.replace("-", "_"), "ci95"


def bmf_file(path: Path) -> Path | None:
    """The BMF file a compare argument names: a .json file, or a folder export wrote one
    in (not an outputs or results folder); None otherwise (a label, an outputs folder)."""
    if path.is_file() and path.suffix == ".json":
        return path
    if path.is_dir() and (path / BMF_FILE).is_file() and not (path / "results").is_dir():
        return path / BMF_FILE
    return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _load(path: Path) -> dict[str, Any]:
    """The BMF document, its shape checked (UsageError naming the file)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"{path}: not a BMF file ({e})") from e
    good = isinstance(doc, dict) and doc and all(
        isinstance(ms, dict) and all(isinstance(m, dict) and _number(m.get("value"))
                                     for m in ms.values()) for ms in doc.values())
    if not good:
        raise UsageError(f"{path}: not a BMF file (benchmark -> measure -> {{value, "
                         "lower_value, upper_value}})")
    return doc


def _metrics(measures: dict[str, Any], launches: dict[str, Any]) -> dict[str, float]:
    """A benchmark's measures as a record's metrics: the median, and its bounds under the
    names a record gives what they are (`_ci95_low`/`_high`, `_p10`/`_p90`, `_low`/`_high`)."""
    out: dict[str, float] = {}
    for slug, m in measures.items():
        metric, kind = parse_measure(slug)
        out[metric] = float(m["value"])
        if _number(m.get("lower_value")) and _number(m.get("upper_value")):
            low, high = BOUNDS[kind]
            out[metric + low], out[metric + high] = float(m["lower_value"]), float(m["upper_value"])
        if _number(launches.get(metric)):
            out[metric + "_n"] = launches[metric]
    return out


def read(path: Path) -> tuple[str, Path, list[dict[str, Any]], str]:
    """(label, where, records, note) of a ResultSet: one record per benchmark (row) of the
    BMF file at `path`, its testbed, label and rows' studies from `bencher.json` beside it
    where present."""
    doc = _load(path)
    side_path = path.with_name(SIDECAR)
    side = json.loads(side_path.read_text()) if side_path.is_file() else {}
    bed = side.get("testbed") or {"id": "unknown", "name": "unknown", "identity": {},
                                  "hosts": None}
    when = side.get("finished_at") or "unknown"
    rows = side.get("benchmarks") or {}
    records = []
    for i, (name, measures) in enumerate(sorted(doc.items())):
        row = rows.get(name) or {}
        table, params = parse_benchmark(name)
        params = row.get("params", params)  # every parameter the row has, where kept
        records.append({
            "schema_version": 3, "run_id": f"bmf-{i}", "study": row.get("study", table),
            "table": table, "notebook": row.get("notebook", ""), "params": params,
            "env": side.get("env") or {}, "method_version": side.get("method_version", ""),
            "started_at": when, "finished_at": when, "status": "ok",
            "error": None, "metrics": _metrics(measures, row.get("n") or {}), "details": {},
            "executed_notebook": None, "label": side.get("label") or path.stem,
            "testbed": bed})
    missing = "" if side else f", and no {SIDECAR} beside it: testbed unknown"
    note = (f" (read back from BMF {path}: one value per row and metric, not each launch's, "
            f"so no verdict{missing})")
    return side.get("label") or path.stem, path.resolve(), records, note
