"""The records an export takes: the ok records of a result set (a label or a folder, as
`compare` opens one), narrowed by `--table`, `--study` and `--testbed`; bad input is
one line naming the flag and what the set holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.compare import bmf
from benchlib.compare.sets import ResultSet, open_set
from benchlib.errors import UsageError


def _narrow(records: list[dict[str, Any]], flag: str, wanted: list[str], names, label: str):
    """The records one of `wanted` names (`names(record)`: the names it answers to)."""
    if not wanted:
        return records
    known = sorted(set().union(*(names(r) for r in records)))
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise UsageError(f"{flag}: {unknown[0]!r} is not in result set {label}; its "
                         f"{flag}s: {', '.join(known)}")
    return [r for r in records if names(r) & set(wanted)]


def chosen(spec: str, results_dir: Path, tables: list[str] | None = None,
           studies: list[str] | None = None,
           testbed: str | None = None) -> tuple[ResultSet, list[dict[str, Any]]]:
    """(the result set, its ok records that pass the filters); UsageError for an unknown
    label or folder, a set without ok records, a filter that names nothing in it, or
    filters that leave nothing."""
    if bmf.bmf_file(Path(spec).expanduser()):
        raise UsageError(f"result_set: {spec} is a BMF file; export reads records: give a "
                         "label or an outputs or results folder")
    rs = open_set(spec, results_dir)
    records = _narrow(rs.records, "table", tables or [], lambda r: {r["table"]}, rs.label)
    records = _narrow(records, "study", studies or [], lambda r: {r["study"], r["table"]},
                      rs.label)
    if testbed:
        beds = sorted({f"{r['testbed']['id']} ({r['testbed']['name']})" for r in records})
        records = [r for r in records if r["testbed"]["id"].startswith(testbed)]
        if not records:
            raise UsageError(f"testbed: no record of {rs.label} chosen here is on a testbed "
                             f"whose id starts {testbed!r}; testbeds: {', '.join(beds)}")
    if not records:
        raise UsageError(f"result_set: {rs.label} has no ok record of table {tables} and "
                         f"study {studies} together")
    return rs, records


def one_testbed(records: list[dict[str, Any]], target: str) -> dict[str, Any]:
    """The one testbed of `records`; UsageError when there are several: a benchmark
    tracker's run is on one testbed (Bencher's --testbed) and names a row once."""
    beds = {r["testbed"]["id"]: r["testbed"] for r in records}
    if len(beds) > 1:
        names = ", ".join(f"{i[:6]} ({b['name']})" for i, b in sorted(beds.items()))
        raise UsageError(f"testbed: {target} takes one testbed a file and these records are "
                         f"on {len(beds)}: {names}; export each with --testbed ID")
    return next(iter(beds.values()))
