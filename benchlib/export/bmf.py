"""`export --to bmf`: the Bencher Metric Format file `bencher run --adapter json --file`
reads, `bmf.json`, and beside it `bencher.json` with what BMF has no place for: the
testbed and commit (`bencher run`'s --testbed and --hash; the command is printed and kept
there), the result set, and each benchmark's record ids, study and n.

A benchmark is a row (benchlib.compare.bmf names it, and `compare` reads the file back);
its measures are the row's figures that have bounds or a direction (compare's
DIRECTIONS): `value` the median, `lower_value`/`upper_value` the 95% interval, or the
p10-p90 spread where there were too few launches for one, and then the measure's name
ends in `-p10-p90` (a share's low-high over one run's steps: `-low-high`). Several
records of one row (launches) are one benchmark over them (figures.row_figures): BMF
holds a row once."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from benchlib.compare import bmf as names
from benchlib.compare.changes import DIRECTIONS
from benchlib.compare.sets import row_params
from benchlib.errors import UsageError
from benchlib.export import figures, files
from benchlib.export.select import one_testbed


def _measures(figs: list[figures.Figure]) -> dict[str, dict[str, float]]:
    out = {}
    for f in figs:
        if f.bounds is None and f.name not in DIRECTIONS:
            continue  # a count or a setting, not a measurement a tracker should chart
        m = {"value": f.value}
        if f.bounds is not None:
            m.update(lower_value=f.low, upper_value=f.high)
        out[names.measure(f.name, f.bounds)] = m
    return out


def documents(label: str, records: list[dict[str, Any]],
              bmf_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the BMF document, its sidecar) of `records`, all on one testbed."""
    bed = one_testbed(records, "bmf")
    doc: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    for name, recs in figures.rows(records).items():
        figs = figures.row_figures(recs)
        measures = _measures(figs)
        if not measures:
            continue
        doc[name] = measures
        rows[name] = {"study": recs[0]["study"], "table": recs[0]["table"],
                      "params": row_params(recs[0]), "notebook": recs[0]["notebook"],
                      "run_ids": [r["run_id"] for r in recs],
                      "n": {f.name: f.n for f in figs if f.n is not None}}
    commit = (bed.get("identity") or {}).get("commit")
    command = ["bencher", "run", "--testbed", bed["name"], *(["--hash", commit] if commit else []),
               "--adapter", "json", "--file", str(bmf_path)]
    newest = max(records, key=lambda r: r["finished_at"])
    side = {"label": label, "testbed": bed, "hash": commit, "env": newest.get("env") or {},
            "method_version": newest.get("method_version", ""),
            "finished_at": newest["finished_at"],
            "command": shlex.join(command), "benchmarks": rows,
            "bounds": "lower_value/upper_value: the 95% interval of the median; on a measure "
                      "ending -p10-p90: the p10-p90 spread (too few launches for an interval); "
                      "ending -low-high: a share's low-high over one run's steps"}
    return doc, side


def export(label: str, records: list[dict[str, Any]], out: Path) -> list[str]:
    """Write `out`/bmf.json and `out`/bencher.json; the lines to print."""
    path = out / names.BMF_FILE
    doc, side = documents(label, records, path)
    if not doc:
        raise UsageError(f"result_set: no figure of its {len(records)} records chosen has "
                         "bounds or a direction: nothing for Bencher")
    files.check(doc, "bmf.json")
    files.writable_folder(out)
    files.write_all({path: files.text(doc), out / names.SIDECAR: files.text(side)})
    measures = sum(len(m) for m in doc.values())
    return [f"bmf: {path} ({len(doc)} benchmarks, {measures} measures; testbed, hash and rows "
            f"in {out / names.SIDECAR})", f"send it: {side['command']}"]
