"""What the CLI's commands share: the outputs folder, help texts, a measurement's record,
a sweep's summary."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchlib import paths

OUTPUTS_HELP = "outputs folder (default: $BENCHLIB_OUTPUTS or outputs/)"
LABEL_HELP = ("result set the records join (default: this testbed's, named after it and "
              "the day it was first used); rows it already has are skipped")
# io, allreduce: a measurement from the shell is never skipped (its record is history)
MEASURE_LABEL_HELP = ("result set the record joins (default: this testbed's, named after it "
                      "and the day it was first used); each run adds a record, also where "
                      "the set has this setting already")


def outputs(args) -> Path:
    """The outputs folder a command writes under (--outputs, else $BENCHLIB_OUTPUTS or
    outputs/); checked to be a folder."""
    if args.outputs:  # notebooks' `outputs/...` parameters follow it (paths.resolve)
        os.environ["BENCHLIB_OUTPUTS"] = str(Path(args.outputs).resolve())
    return paths.checked_outputs(paths.outputs_dir())


def start_record(args, command: str, params: dict):
    """The record-to-be of `benchlib <command>` measuring `params` (records/command_run.py):
    its free id under --table, its testbed and result set (--label); `.write()` it after."""
    from benchlib.records import command_run

    return command_run.start(outputs(args) / "results", args.table, command, params,
                             args.label)


def report_sweep(summary, title: str) -> int:
    """Each failed row on stderr, the summary line on stdout; 1 when a row failed."""
    for f in summary.failures:
        err = f["error"]
        print(f"FAILED {f['source']} (run {f['run_id']}): {err['type']}: {err['message']}\n"
              f"       notebook: {f['executed_notebook']}", file=sys.stderr)
        if f.get("slurm_log"):
            print(f"       Slurm log: {f['slurm_log']}", file=sys.stderr)
    print(f"{title}: {summary.line()}")
    return 1 if summary.failed else 0

