"""`export --to github-action-benchmark`: the JSON arrays github-action-benchmark's custom
tools read, one file per direction, named for the `tool:` that reads it:
`customBiggerIsBetter.json` (samples/s, bandwidth, MFU, ...) and
`customSmallerIsBetter.json` (seconds); a figure without a direction (compare's
DIRECTIONS) goes in neither.

An entry is a row's figure: `name` the row and metric, `value` the median, `range` its
95% interval, or its p10-p90 spread where there were too few launches for an interval,
saying so; `extra` n, the testbed, torch, CUDA, commit and the record ids. The action's
alert compares `value` alone with the previous run, so `range` and `extra` are what keep
the evidence beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.compare.changes import DIRECTIONS
from benchlib.errors import UsageError
from benchlib.export import figures, files
from benchlib.export.select import one_testbed

TOOLS = {+1: "customBiggerIsBetter", -1: "customSmallerIsBetter"}  # the file's name and tool


def _extra(fig: figures.Figure, recs: list[dict[str, Any]], bed: dict[str, str]) -> str:
    n = f"n={fig.n}" if fig.n is not None else "n unknown" if fig.bounds else "one value"
    lines = [f"{n} ({'over ' + str(len(recs)) + ' records' if len(recs) > 1 else 'one record'})",
             f"testbed {bed['name']} ({bed['id']}): {bed['hardware']}",
             f"torch {bed.get('torch', '?')}, CUDA {bed.get('cuda', 'none')}, "
             f"commit {bed.get('commit', 'unknown')}",
             f"label {recs[0]['label']}, records {', '.join(r['run_id'] for r in recs)}"]
    return "\n".join(lines)


def entries(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """direction -> its BenchmarkResult entries, for records all on one testbed."""
    one_testbed(records, "github-action-benchmark")
    out: dict[int, list[dict[str, Any]]] = {+1: [], -1: []}
    for row, recs in figures.rows(records).items():
        bed = figures.testbed(recs[-1])
        for fig in figures.row_figures(recs):
            if fig.name not in DIRECTIONS:
                continue
            entry = {"name": f"{row} [{fig.name}]", "value": fig.value,
                     "unit": figures.unit(fig.name), "extra": _extra(fig, recs, bed)}
            if fig.bounds is not None:
                entry["range"] = fig.bounds_text()
            out[DIRECTIONS[fig.name]].append(entry)
    return out


def export(label: str, records: list[dict[str, Any]], out: Path) -> list[str]:
    """Write a file per direction that has entries into `out` (removing the other, which
    an earlier export may have left); the lines to print."""
    found = entries(records)
    if not any(found.values()):
        raise UsageError(f"result_set: no figure of its {len(records)} records chosen has a "
                         "direction (bigger or smaller is better): nothing for the action")
    for entry_list in found.values():
        files.check(entry_list, "github-action-benchmark.json")
    paths = {out / f"{TOOLS[d]}.json": files.text(e) for d, e in found.items() if e}
    files.writable_folder(out)
    files.write_all(paths)
    for d, e in found.items():
        if not e:
            (out / f"{TOOLS[d]}.json").unlink(missing_ok=True)
    return [f"github-action-benchmark: {out / (TOOLS[d] + '.json')} ({len(e)} "
            f"entr{'y' if len(e) == 1 else 'ies'}; tool: '{TOOLS[d]}')" for d, e in found.items() if e]
