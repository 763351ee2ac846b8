"""Result records: one JSON file per run, written atomically, read back as a DataFrame.

    outputs/results/<study>/<run_id>.json

A notebook does not write its own record. It hands its metrics to `publish()`; the
sweep that ran it adds the parameters, the environment, the times, the status and the
executed notebook's path, and writes the record in one rename. A notebook that raised
still gets a record, with status "failed" and the error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchlib import METHOD_VERSION, atomic
from benchlib.errors import RecordError, UnreadableRecord

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed")
REQUIRED = ("schema_version", "run_id", "study", "notebook", "params", "env", "method_version",
            "started_at", "finished_at", "status", "error", "metrics", "executed_notebook")
# Set by the sweep for the kernel it starts: where publish() leaves the metrics.
METRICS_FILE_VAR = "BENCHLIB_METRICS_FILE"
RUN_ID_VAR = "BENCHLIB_RUN_ID"


def current_run_id() -> str:
    """The run id the sweep gave this kernel; `interactive` when run by hand."""
    return os.environ.get(RUN_ID_VAR, "interactive")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_id_for(study: str, notebook: str, params: dict[str, Any]) -> str:
    """A stable id: the same study, notebook name and parameters give the same id anywhere."""
    key = json.dumps({"study": study, "notebook": notebook, "params": atomic.to_jsonable(params)},
                     sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def record_path(results_dir: Path, study: str, run_id: str) -> Path:
    return Path(results_dir) / study / f"{run_id}.json"


def make_record(*, run_id: str, study: str, notebook: str, params: dict, env: dict,
                started_at: str, status: str, metrics: dict | None = None,
                details: dict | None = None, error: dict | None = None,
                executed_notebook: str | None = None,
                executor: dict | None = None) -> dict[str, Any]:
    if status not in STATUSES:
        raise RecordError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
    clash = sorted(set(metrics or {}) & set(params))
    if clash:
        raise RecordError(f"metrics: {', '.join(clash)} already name parameters; rename the metric")
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "study": study,
        "notebook": notebook,
        "params": params,
        "env": env,
        "method_version": METHOD_VERSION,
        "started_at": started_at,
        "finished_at": now(),
        "status": status,
        "error": error,
        "metrics": metrics or {},
        "details": details or {},
        "executed_notebook": executed_notebook,
        "executor": executor or {"name": "local"},  # where it ran: local, or Slurm job/log
    }


def write_record(results_dir: Path, record: dict[str, Any]) -> Path:
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise RecordError(f"record: missing {', '.join(missing)}")
    return atomic.write_json(record_path(results_dir, record["study"], record["run_id"]), record)


def read_record(path: Path) -> dict[str, Any]:
    """One record file, checked: UnreadableRecord names the file and what is wrong."""
    try:
        record = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise UnreadableRecord(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableRecord(f"{path}: cannot be read ({e})") from e
    missing = [k for k in REQUIRED if k not in record] if isinstance(record, dict) else REQUIRED
    if missing:
        raise UnreadableRecord(f"{path}: not a benchlib record (no {', '.join(missing)})")
    return record


def _warn_skipped(error: UnreadableRecord) -> None:
    print(f"benchlib: skipped {error}", file=sys.stderr)


def find_record(results_dir: Path, study: str, run_id: str) -> dict[str, Any] | None:
    """The row's record, or None; an unreadable one counts as none (the row runs again
    and its new record replaces the broken file), with a warning."""
    path = record_path(results_dir, study, run_id)
    if not path.exists():
        return None
    try:
        return read_record(path)
    except UnreadableRecord as e:
        _warn_skipped(e)
        return None


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """Every readable record under `results_dir`; an unreadable file is skipped with one
    warning naming it and why, and the rest are read."""
    records = []
    for path in record_files(results_dir):
        try:
            records.append(read_record(path))
        except UnreadableRecord as e:
            _warn_skipped(e)
    return records


def record_files(results_dir: Path) -> list[Path]:
    """Every record under `results_dir` (temporary files start with a dot and are skipped)."""
    return sorted(p for p in Path(results_dir).glob("*/*.json") if not p.name.startswith("."))


ENV_COLUMNS = {"hostname": "host", "cpu_model": "cpu"}


def load_results(results_dir: str | Path, study: str | None = None):
    """All records as a pandas DataFrame: one row per run, params and metrics as columns.

    Columns: run_id, study, notebook, status, error, started_at, finished_at, duration_s,
    method_version, host, cpu, gpu, torch, executed_notebook, then every parameter and
    every metric under its own name.
    """
    import pandas as pd

    from benchlib import paths

    rows = []
    for rec in read_records(paths.resolve(results_dir)):
        if study is not None and rec["study"] != study:
            continue
        env = rec.get("env", {})
        row = {k: rec[k] for k in ("run_id", "study", "notebook", "status", "method_version",
                                   "started_at", "finished_at", "executed_notebook")}
        row["error"] = (rec["error"] or {}).get("message")
        row.update({col: env.get(key) for key, col in ENV_COLUMNS.items()})
        row["gpu"] = ", ".join(g["name"] for g in env.get("gpus", [])) or None
        row["torch"] = env.get("packages", {}).get("torch")
        row.update(rec["params"])
        row.update(rec["metrics"])
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("started_at", "finished_at"):
        df[col] = pd.to_datetime(df[col], format="ISO8601")
    df.insert(df.columns.get_loc("finished_at") + 1, "duration_s",
              (df["finished_at"] - df["started_at"]).dt.total_seconds())
    return df.copy()  # one block: the inserts above fragment a wide frame (pandas warns)


def load_details(results_dir: str | Path, key: str, study: str | None = None):
    """One row per item of each ok record's `details[key]` list (e.g. per-repeat values),
    with the record's run_id, study, parameters and text metrics (device_name,
    data_source, ...) beside it, so items can be grouped by the setup they came from."""
    import pandas as pd

    from benchlib import paths

    rows = []
    for rec in read_records(paths.resolve(results_dir)):
        if rec["status"] != "ok" or (study is not None and rec["study"] != study):
            continue
        labels = {k: v for k, v in rec["metrics"].items() if isinstance(v, str)}
        for item in rec.get("details", {}).get(key, []):
            rows.append({"run_id": rec["run_id"], "study": rec["study"],
                         "notebook": rec["notebook"], **rec["params"], **labels, **item})
    return pd.DataFrame(rows)


def publish(metrics: dict[str, Any], details: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hand a run's metrics (flat name -> number) to the sweep that runs this notebook.

    `details` holds anything larger (per-repeat values, tables) for the analysis.
    Run by hand in JupyterLab there is no sweep: the metrics are returned, not stored.
    """
    payload = atomic.to_jsonable({"metrics": metrics, "details": details or {}})
    for name, value in payload["metrics"].items():
        if not (value is None or isinstance(value, (int, float, str, bool))):
            raise RecordError(f"metrics: {name} must be a number or a string, got {value!r}")
    target = os.environ.get(METRICS_FILE_VAR)
    if target:
        atomic.write_json(Path(target), payload)
    else:
        print("benchlib: not run by a sweep; metrics shown, not stored", file=sys.stderr)
    return payload["metrics"]
