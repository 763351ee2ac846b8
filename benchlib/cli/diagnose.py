"""`benchlib diagnose RUN_ID|LABEL ... [--try]`: what holds each run back, the evidence,
and the change that helps (benchlib.diagnose.rules); `--try` runs the run's own row
again with that change and reports the measured difference with its interval."""

from __future__ import annotations

from typing import Any

import benchlib.cli.common as common
from benchlib.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("diagnose", help="what holds a run back, and which measured change helps")
    p.add_argument("runs", nargs="+", metavar="RUN_ID|LABEL",
                   help="a run id (or its start), or a result set's label: each of its runs")
    p.add_argument("--try", dest="try_change", action="store_true",
                   help="run each diagnosed row again with the suggested change and report "
                        "the measured samples/s against the original, with its interval")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_diagnose)


def chosen(records: list[dict[str, Any]], wanted: list[str]) -> list[dict[str, Any]]:
    """The records each of `wanted` names (a run id, its start, or a label), in order."""
    out = []
    for name in wanted:
        found = [r for r in records if r.get("label") == name] or \
            [r for r in records if str(r.get("run_id", "")).startswith(name)]
        if not found:
            raise UsageError(f"runs: no record has run id or label {name!r}; "
                             "`python -m benchlib report` lists the runs")
        out += [r for r in found if r not in out]
    return out


def cmd_diagnose(args) -> int:
    from benchlib.diagnose import rules
    from benchlib.records import results
    from benchlib.records.read import read_records

    folder = common.outputs(args) / "results"
    records = read_records(folder)
    frame = results.frame(records)
    shown = 0
    for record in chosen(records, args.runs):
        if rules.column(record) == "":
            print(f"{record['run_id']}: not a training run with step times "
                  f"({record.get('study')}, {record.get('status')}): nothing to diagnose")
            continue
        bed = (record.get("testbed") or {}).get("id")
        same = frame[frame["testbed_id"] == bed] if bed and not frame.empty else None
        found = rules.diagnose(record, same)
        print(found.text())
        shown += 1
        if args.try_change:
            print(try_change(record, found, args))
    return 0 if shown else 2


def try_change(record: dict[str, Any], found, args) -> str:
    """The record's row again with the diagnosis' change, and the verdict on the two."""
    from benchlib.analysis.sides import compare, side
    from benchlib.records import results
    from benchlib.runs import params, sweep

    if not found.try_params:
        return "  try: no change to measure for this verdict"
    notebook = record["notebook"]
    if not notebook.endswith(".ipynb"):
        return f"  try: {notebook} is not a notebook row; run the suggested command"
    table = f"{record['table']}_try"
    row = params.single_row(notebook, {**record["params"], **found.try_params}, table)
    params.preflight([row])
    sweep.run_plan([row], common.outputs(args), progress=False)
    new = results.find_record(common.outputs(args) / "results", row.table, row.run_id)
    change = ", ".join(f"{k}={v}" for k, v in found.try_params.items())
    if new.get("status") != "ok":
        return f"  try {change}: the row failed ({(new.get('error') or {}).get('message')})"
    before, after = (results.frame([r]) for r in (record, new))
    text = compare(side(change, after), side("as it ran", before)).replace("**", "")
    return f"  try {change} (run {new['run_id']}): samples/s {text}"
