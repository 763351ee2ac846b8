"""`benchlib diagnose RUN_ID|LABEL ... [--try [--launches N]]`: what holds each run back,
the evidence, and the change that helps (benchlib.diagnose.rules); on a failed run, its
error and its log. `--try` relaunches the run's own row and the row with that change,
interleaved in alternating order (original, changed, then changed, original, ...: drift
falls on both sides, as the compile study interleaves), N launches a side, and reports the
measured difference by the one verdict rule: a direction only from 5 or more a side. A
run on a shared host is tried too (the change its figures alone suggest), and the line
says which launches shared their cores."""

from __future__ import annotations

import re
from typing import Any

import benchlib.cli.common as common
from benchlib.errors import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("diagnose", help="what holds a run back, and which measured change helps")
    p.add_argument("runs", nargs="+", metavar="RUN_ID|LABEL",
                   help="a run id (or its start), or a result set's label: each of its runs")
    p.add_argument("--try", dest="try_change", action="store_true",
                   help="relaunch each diagnosed row and the row with the suggested change, "
                        "interleaved, and report the measured samples/s of the two with "
                        "their interval")
    p.add_argument("--launches", type=int, default=1,
                   help="with --try: launches a side (5 or more for a direction; default 1)")
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


def failed_text(record: dict[str, Any]) -> str:
    """A failed run: its error and where its log is."""
    error = record.get("error") or {}
    message = error.get("message") or error.get("type") or "no error recorded"
    lines = [f"{record['run_id']}: failed ({record.get('study')}): {message}"]
    log = error.get("log") or next(iter(re.findall(r"logs?: (\S+?);?$", message)), None)
    if log:
        lines.append(f"  log: {log}")
    if record.get("executed_notebook"):
        lines.append(f"  notebook: {record['executed_notebook']}")
    return "\n".join(lines)


def cmd_diagnose(args) -> int:
    from benchlib.diagnose import rules
    from benchlib.records import results
    from benchlib.records.read import read_records

    if args.launches < 1:
        raise UsageError(f"launches: must be >= 1, got {args.launches}")
    folder = common.outputs(args) / "results"
    records = read_records(folder)
    frame = results.frame(records)
    shown = 0
    for record in chosen(records, args.runs):
        if record.get("status") != "ok":
            print(failed_text(record))
            shown += 1
            continue
        if rules.column(record) == "":
            print(f"{record['run_id']}: {rules.why_not(record)}: nothing to diagnose")
            continue
        bed = (record.get("testbed") or {}).get("id")
        same = frame[frame["testbed_id"] == bed] if bed and not frame.empty else None
        found = rules.diagnose(record, same)
        print(found.text())
        shown += 1
        if args.try_change:
            print(try_change(record, found, args))
    return 0 if shown else 2


def _prefetched_only(params: dict[str, Any]) -> str:
    """Why a row's timed window would hold only batches prefetched at start-up, or ''."""
    from benchlib.core.loops import PREFETCH_FACTOR

    steps, workers = params.get("max_steps") or 0, params.get("num_workers") or 0
    if steps and workers and steps <= PREFETCH_FACTOR * workers:
        return (f"{workers} workers prefetch {PREFETCH_FACTOR * workers} batches at start-up, "
                f"and max_steps {steps} times no other: give max_steps above "
                f"{PREFETCH_FACTOR * workers} (with warmup_steps past them)")
    return ""


def order(launches: int) -> list[int]:
    """The sides of `--try` in the order they launch (0: the row as it ran, 1: changed):
    0 1 1 0 0 1 ..., each round the other side first, so that a host that drifts (warms,
    fills its caches, gets busier) does not favour one side."""
    return [side for r in range(launches) for side in ((0, 1) if r % 2 == 0 else (1, 0))]


def shared(original: dict[str, Any], runs: dict[int, list[dict[str, Any]]]) -> str:
    """'; the host was shared: the original run contended; as it ran, 1 of 2 launches
    contended; changed, 2 of 2 contended' from each record's contention during its timed
    steps (the start sample's busy flag for a record without one), '' where none was."""
    def state(r: dict[str, Any]) -> str | None:
        measured = (r.get("metrics") or {}).get("host_contention")
        return measured or ("contended" if (r.get("host_load") or {}).get("busy") else None)

    parts = []
    if state(original) in ("contended", "borderline"):
        parts.append(f"the original run {state(original)}")
    for name, side in (("as it ran", runs[0]), ("changed", runs[1])):
        counts = [f"{sum(state(r) == s for r in side)} {s}" for s in ("contended", "borderline")
                  if any(state(r) == s for r in side)]
        if counts:
            parts.append(f"{name}, {' and '.join(counts)} of {len(side)} launches")
    return ("; the host was shared (other tasks on the job's cores during the timed steps): "
            + "; ".join(parts)) if parts else ""


def try_change(record: dict[str, Any], found, args) -> str:
    """The record's row and the row with the diagnosis' change, relaunched in turn
    (`--launches` a side), and the verdict on the two."""
    from benchlib.analysis.common import WHOLE_EPOCH_RATE, projected, with_whole_epoch
    from benchlib.analysis.sides import judged, side
    from benchlib.config import studies
    from benchlib.records import results
    from benchlib.runs import params, sweep

    if not found.try_params:
        return "  try: no change to measure for this verdict"
    entry = studies.of_notebook_entry(record["notebook"])
    if entry is None or not entry.module:
        return f"  try: {record['notebook']} is not a notebook row; run the suggested command"
    change = ", ".join(f"{k}={v}" for k, v in found.try_params.items())
    tried = {**record["params"], **found.try_params}
    for what, p in (("the original row", record["params"]), (change, tried)):
        if why := _prefetched_only(p):
            return f"  try {change}: refused: {what} would time only prefetched batches: {why}"
    table = f"{record['table']}_try"
    rows = [params.single_row(entry.notebook, p, table) for p in (record["params"], tried)]
    params.preflight(rows)
    runs: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    for i in order(args.launches):  # original, changed, changed, original, ...
        runs[i].append(sweep.run_row(rows[i], common.outputs(args)))
    failed = [r for r in runs[0] + runs[1] if r["status"] != "ok"]
    if failed:
        return (f"  try {change}: {len(failed)} launch(es) failed "
                f"({(failed[0].get('error') or {}).get('message')})")
    prefetched = [r["run_id"] for r in runs[0] + runs[1]
                  if (r.get("metrics") or {}).get("window_prefetched_only")]
    if prefetched:
        return (f"  try {change}: no figure: the timed windows of {', '.join(prefetched)} held "
                "only batches prefetched at start-up")
    before, after = (with_whole_epoch(results.frame(runs[i])) for i in (0, 1))
    col, unit = "samples_per_s", "samples/s"
    if any((r.get("metrics") or {}).get("startup_hidden") for r in runs[0] + runs[1]):
        col, unit = WHOLE_EPOCH_RATE, "whole-epoch samples/s (a steady rate hides start-up)"
        if projected(before).any() or projected(after).any():
            unit = "whole-epoch samples/s of the data set, projected (a steady rate hides start-up)"
    text = judged(side(change, after, col), side("as it ran", before, col))
    ids = ", ".join(r["run_id"] for r in runs[1])
    return (f"  try {change} ({args.launches} launch{'es' if args.launches > 1 else ''} a side, "
            f"interleaved with the row as it ran; runs {ids}): {unit} {text}"
            + shared(record, runs))
