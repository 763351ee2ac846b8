"""Result records: one JSON file per run, written atomically, read back as a DataFrame.

    outputs/results/<table>/<run_id>.json

A record names its study (`study`: single_device_io, config/studies.py's name for its
notebook), the parameter table its row came from (`table`: io_workers, its folder and part
of its run id) and its result set (`label`): three fields, each for one thing.

A notebook does not write its own record. It hands its metrics to `publish()`; the
sweep that ran it adds the parameters, the environment, the times, the status and the
executed notebook's path, and writes the record in one rename. A notebook that raised
still gets a record, with status "failed" and the error. The record files are read back
(checked, versions 1 and 2 upgraded) by benchlib.records.read; its names are importable
from here too.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchlib import METHOD_VERSION, atomic
from benchlib.config import studies
from benchlib.errors import RecordError, UnreadableRecord  # noqa: F401 (read as results.X)
from benchlib.records import testbed

# records read back (records/read.py); callers also take these names from here (results.X)
from benchlib.records.read import (  # noqa: F401
    REQUIRED,
    SCHEMA_VERSION,
    STATUSES,
    find_record,
    free_run_id,
    has_ok_record,
    read_record,
    read_records,
    record_files,
    record_path,
)

# Set by the sweep for the kernel it starts: where publish() leaves the metrics.
METRICS_FILE_VAR = "BENCHLIB_METRICS_FILE"
RUN_ID_VAR = "BENCHLIB_RUN_ID"


def current_run_id() -> str:
    """The run id the sweep gave this kernel; `interactive` when run by hand."""
    return os.environ.get(RUN_ID_VAR, "interactive")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_id_for(table: str, notebook: str, params: dict[str, Any],
               testbed_id: str | None = None) -> str:
    """A stable id: the same table, notebook name and parameters give the same id anywhere;
    with `testbed_id`, the same id on the same testbed only (a row's identity)."""
    # "study" is the key the table's name had before records named their study: kept, so
    # that a row keeps its id (and a rerun finds its record)
    identity = {"study": table, "notebook": notebook, "params": atomic.to_jsonable(params)}
    if testbed_id is not None:
        identity["testbed"] = testbed_id
    key = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def make_record(*, run_id: str, table: str, notebook: str, params: dict, env: dict,
                started_at: str, status: str, metrics: dict | None = None,
                details: dict | None = None, error: dict | None = None,
                executed_notebook: str | None = None,
                executor: dict | None = None, label: str | None = None,
                testbed: dict | None = None,
                host_load: dict | None = None,
                params_raw: dict | None = None) -> dict[str, Any]:
    """A record of a row of `table` that ran `notebook` (its study is the notebook's:
    config.studies.of_notebook); `testbed` defaults to the one `env` describes, `label` to
    that testbed's default result set dated today; `host_load` is core.hostload.span()
    (None: unknown). `params` are the values the run received (an old name or value read
    as now: its identity); `params_raw`, the table's row as written, is kept only where
    it says something else (runs.params.Row.params_raw)."""
    if status not in STATUSES:
        raise RecordError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
    clash = sorted(set(metrics or {}) & set(params))
    if clash:
        raise RecordError(f"metrics: {', '.join(clash)} already name parameters; rename the metric")
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "study": studies.of_notebook(notebook),
        "table": table,
        "notebook": notebook,
        "params": params,
        **({"params_raw": params_raw} if params_raw is not None else {}),
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
        "host_load": host_load,  # load average and cores at start and end, busy flag
        **_testbed_and_label(env, testbed, label),
    }


def _testbed_and_label(env: dict, bed: dict | None, label: str | None) -> dict[str, Any]:
    bed = bed or testbed.from_env(env)
    return {"testbed": bed, "label": testbed.check_label(label or testbed.default_label([], bed))}


def write_record(results_dir: Path, record: dict[str, Any]) -> Path:
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise RecordError(f"record: missing {', '.join(missing)}")
    return atomic.write_json(record_path(results_dir, record["table"], record["run_id"]), record)


ENV_COLUMNS = {"hostname": "host", "cpu_model": "cpu"}


def hardware(env: dict[str, Any], bed: dict[str, Any] | None = None) -> str:
    """What a speedup's baseline must share with the run: device model and count, CPU
    model, host (`2 x NVIDIA H100 80GB HBM3; AMD EPYC 9454; node07`). On a Slurm testbed
    the partition stands for the host, as in the testbed itself: its array tasks land on
    whichever of its nodes are free."""
    identity = (bed or {}).get("identity") or {}
    host = f"{identity.get('cluster') or 'slurm'}/{identity.get('partition')}" \
        if identity.get("kind") == "slurm" else env.get("hostname") or "?"
    return f"{testbed.devices(env)}; {env.get('cpu_model') or '?'}; {host}"


def select(records: list[dict[str, Any]], study: str | None = None, label: str | None = None,
           testbed_id: str | None = None, latest: bool = False) -> list[dict[str, Any]]:
    """Records of one study (its name or its table's), result set (label) or testbed (id
    or its first characters); `latest`: only the newest ok record of each row on each
    testbed (`latest_ok`)."""
    chosen = [r for r in records if (study is None or study in (r["study"], r["table"]))
              and (label is None or r["label"] == label)
              and (testbed_id is None or r["testbed"]["id"].startswith(testbed_id))]
    return latest_ok(chosen) if latest else chosen


def latest_ok(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest ok record of each row (table, notebook, parameters) on each testbed, in
    the order given: what notebook 90's tables, the report's findings and their figures
    all read, so the two show the same runs. A row whose newest rerun failed keeps its
    newest ok record here (the failure is listed with the failures); the same row on two
    testbeds is two measurements, both kept."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted((r for r in records if r["status"] == "ok"), key=lambda r: r["finished_at"]):
        bed = (r.get("testbed") or {}).get("id") or ""
        newest[(run_id_for(r["table"], r["notebook"], r["params"]), bed)] = r
    keep = {id(r) for r in newest.values()}
    return [r for r in records if id(r) in keep]


def load_results(results_dir: str | Path, study: str | None = None, *, label: str | None = None,
                 testbed: str | None = None, latest: bool = False):
    """All records as a pandas DataFrame: one row per run, params and metrics as columns.
    `label`, `testbed` (an id or its start) and `latest` select as `select()` does.

    Columns: run_id, study, table, notebook, status, error, started_at, finished_at, duration_s,
    method_version, host, cpu, gpu, torch, hardware, executed_notebook, label, testbed (its
    name), testbed_id, then every parameter and every metric under its own name.
    """
    from benchlib import paths

    return frame(select(read_records(paths.resolve(results_dir)), study, label, testbed, latest))


def frame(records: list[dict[str, Any]]):
    """Records as load_results gives them: the one frame notebook 90 and the report's
    landing page compute their sentences from."""
    import pandas as pd

    df = pd.DataFrame([row(rec) for rec in records])
    if df.empty:
        return df
    for col in ("started_at", "finished_at"):
        df[col] = pd.to_datetime(df[col], format="ISO8601")
    df.insert(df.columns.get_loc("finished_at") + 1, "duration_s",
              (df["finished_at"] - df["started_at"]).dt.total_seconds())
    return df.copy()  # one block: the inserts above fragment a wide frame (pandas warns)


def row(rec: dict[str, Any]) -> dict[str, Any]:
    """One record as its row of `frame` (its times still text)."""
    env = rec.get("env", {})
    bed = rec.get("testbed") or {}  # read_record gives every field; a built one may not
    out = {k: rec.get(k) for k in ("run_id", "study", "table", "notebook", "status",
                                   "method_version",
                                   "started_at", "finished_at", "executed_notebook", "label")}
    out.update(testbed=bed.get("name"), testbed_id=bed.get("id"))
    out["error"] = (rec.get("error") or {}).get("message")
    out.update({col: env.get(key) for key, col in ENV_COLUMNS.items()})
    out["gpu"] = ", ".join(g["name"] for g in env.get("gpus", [])) or None
    out["torch"] = env.get("packages", {}).get("torch")
    out["hardware"] = hardware(env, bed or None)
    # a mapping parameter (model_args) as its JSON text: a frame's cells are grouped and
    # compared, which a dict cannot be
    out.update({k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v
                for k, v in rec["params"].items()})
    out.update(rec["metrics"])
    out["samples_per_s_launches"] = launch_values(rec)
    out["samples_per_s_epochs"] = launch_values(rec, "epochs")
    return out


def launch_values(rec: dict[str, Any], key: str = "launches") -> tuple[float, ...] | None:
    """Each launch's samples/s (`details.launches`, one value per process), for a verdict
    over independent launches, or with key `epochs` each epoch's (for the spread inside a
    launch); None when the record does not keep them."""
    items = (rec.get("details") or {}).get(key)
    if not isinstance(items, list) or not items:
        return None
    values = tuple(float(i["samples_per_s"]) for i in items
                   if isinstance(i, dict) and isinstance(i.get("samples_per_s"), (int, float))
                   and math.isfinite(i["samples_per_s"]))
    return values or None


def load_details(results_dir: str | Path, key: str, study: str | None = None, *,
                 label: str | None = None, testbed: str | None = None, latest: bool = False):
    """One row per item of each ok record's `details[key]` list (e.g. per-repeat values),
    with the record's run_id, study, parameters and text metrics (device_name,
    data_source, ...) beside it, so items can be grouped by the setup they came from.
    `label`, `testbed` and `latest` select as `select()` does."""
    from benchlib import paths

    ok = [r for r in read_records(paths.resolve(results_dir)) if r["status"] == "ok"]
    return details_frame(select(ok, study, label, testbed, latest), key)


def details_frame(records: list[dict[str, Any]], key: str):
    """One row per item of each record's `details[key]` (see load_details)."""
    import pandas as pd

    rows = []
    for rec in records:
        labels = {k: v for k, v in rec["metrics"].items() if isinstance(v, str)}
        for item in rec.get("details", {}).get(key, []):
            rows.append({"run_id": rec["run_id"], "study": rec["study"], "table": rec["table"],
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


def assign_result_set(rows: list, results_dir: Path, label: str | None = None,
                      bed: dict[str, Any] | None = None) -> list:
    """The sweep's rows with their testbed (this process's unless given) and result set
    (`label`, else the testbed's default one)."""
    import dataclasses

    bed = bed or testbed.current()
    if label is None:
        label = testbed.default_label(read_records(results_dir), bed)
    testbed.check_label(label)
    return [dataclasses.replace(r, testbed=bed, label=label) for r in rows]
