"""`benchlib export RESULT_SET --to TARGET`: the target checked, the records chosen, and
the target's module called; what each writes is in its module's docstring."""

from __future__ import annotations

import os
from pathlib import Path

from benchlib import paths
from benchlib.errors import ConfigError
from benchlib.export import bmf, github_action, mlflow_runs, select, tensorboard_events

TARGETS = ("mlflow", "tensorboard", "bmf", "github-action-benchmark")
FILE_TARGETS = {"tensorboard": tensorboard_events, "bmf": bmf,
                "github-action-benchmark": github_action}


def check_target(to: str | None, out: str | None, tracking_uri: str | None) -> str:
    """The target; ConfigError for a missing or unknown one, or a flag it does not take."""
    if to not in TARGETS:
        given = "missing" if to is None else f"{to!r} is not a target"
        raise ConfigError("to", f"{given}; targets: {', '.join(TARGETS)}")
    if to == "mlflow" and out:
        raise ConfigError("out", "--to mlflow writes to a tracking server (--tracking-uri), "
                          "not to a folder")
    if to != "mlflow" and tracking_uri:
        raise ConfigError("tracking_uri", f"only --to mlflow takes it; --to {to} writes files "
                          "(--out)")
    return to


def export(spec: str, to: str | None, outputs: Path, out: str | None = None,
           tracking_uri: str | None = None, tables: list[str] | None = None,
           studies: list[str] | None = None, testbed: str | None = None) -> list[str]:
    """Export the ok records of result set `spec` (a label in `outputs`/results, or a
    folder) that the filters leave; the lines to print. A file target writes into `out`
    (default `outputs`/export/<label>/<target>)."""
    to = check_target(to, out, tracking_uri)
    rs, records = select.chosen(spec, outputs / "results", tables, studies, testbed)
    if to == "mlflow":
        return mlflow_runs.export(records, rs.where,
                                  tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
    folder = paths.from_command_line(out) if out else outputs / "export" / rs.label / to
    return FILE_TARGETS[to].export(rs.label, records, folder)
