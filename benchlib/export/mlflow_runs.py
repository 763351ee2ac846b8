"""`export --to mlflow`: one MLflow run per record on a tracking server, in the experiment
`benchlib/<table>`:

- metrics: each figure's median under its own name, and beside it `X_ci95_low` and
  `X_ci95_high` (its 95% interval) or, where there were too few launches for one,
  `X_p10` and `X_p90` (the spread, named as such; a share of a step: `X_low`, `X_high`
  over one run's steps), and `X_n`; the tag
  `benchlib.bounds.X` says which in words. MLflow has no interval type: these names are
  the interval;
- params: the record's parameters;
- tags: `benchlib.run_id`, label, study, table, the testbed (`benchlib.testbed.*`:
  hardware, torch, CUDA, ...) and its commit as `mlflow.source.git.commit`, the record's
  text metrics (`benchlib.metric.device_name`);
- artifacts: the record (`record/`) and the executed notebook (`notebook/`).

Exporting again creates nothing: a record's run is found by its `benchlib.run_id` and
`benchlib.label` tags first. A run is marked FINISHED last; one found unfinished (an
export stopped half-way) is deleted and made again, and a run whose writing fails is
deleted, so none is left half-written. The server is asked for `/health` before anything
is written: an unreachable one is one line, exit 2."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from benchlib.compare.bmf import BOUNDS
from benchlib.errors import BenchlibError, UsageError
from benchlib.export import figures
from benchlib.records import results

HEALTH_TIMEOUT_S = 5.0
BOUNDS_WORDS = {figures.CI95: "95% interval of the median (X_ci95_low, X_ci95_high)",
                figures.SPREAD: "p10-p90 spread (X_p10, X_p90): too few launches for an "
                                "interval, not one",
                figures.STEPS: "low-high over one run's steps (X_low, X_high): not an interval "
                               "over launches"}


def check_reachable(uri: str | None) -> str:
    """The tracking URI, once its server answers `/health`; UsageError otherwise."""
    if not uri:
        raise UsageError("tracking_uri: --to mlflow needs --tracking-uri http(s)://HOST:PORT "
                         "(an `mlflow server`), or MLFLOW_TRACKING_URI set")
    if not uri.startswith(("http://", "https://")):
        raise UsageError(f"tracking_uri: {uri!r} must be an http:// or https:// MLflow tracking "
                         "server (`mlflow server`)")
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S) as r:
            r.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = getattr(e, "reason", e)
        raise UsageError(f"tracking_uri: {uri} is unreachable ({why}); nothing was written") from e
    return uri


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


def metrics(record: dict[str, Any]) -> dict[str, float]:
    """name -> value: each figure's median, its bounds under the names of what they are,
    and its n."""
    out: dict[str, float] = {}
    for f in figures.figures(record["metrics"]):
        out[f.name] = f.value
        if f.bounds:
            low, high = BOUNDS[f.bounds]  # the names a record gives them
            out[f.name + low], out[f.name + high] = f.low, f.high
        if f.n is not None:
            out[f"{f.name}_n"] = float(f.n)
    return out


def tags(record: dict[str, Any]) -> dict[str, str]:
    bed = figures.testbed(record)
    out = {f"benchlib.{k}": str(record[k]) for k in ("run_id", "label", "study", "table",
                                                     "notebook", "finished_at")}
    out.update({f"benchlib.testbed.{k}": v for k, v in bed.items()})
    out.update({f"benchlib.bounds.{f.name}": BOUNDS_WORDS[f.bounds]
                for f in figures.figures(record["metrics"]) if f.bounds})
    out.update({f"benchlib.metric.{k}": v for k, v in record["metrics"].items()
                if isinstance(v, str)})  # text a record holds among its metrics (device_name)
    if bed.get("commit"):
        out["mlflow.source.git.commit"] = bed["commit"]
    out["mlflow.note.content"] = (
        f"benchlib record {record['run_id']} of result set {record['label']} ({record['study']}, "
        f"table {record['table']}) on testbed {bed['name']}: {bed['hardware']}. Metrics are "
        "medians; X_ci95_low/X_ci95_high a 95% interval, X_p10/X_p90 the spread where there were "
        "too few launches for one, X_low/X_high a share's low-high over one run's steps, X_n the "
        "values behind it.")
    return out


def params(record: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
            for k, v in record["params"].items()}


def _client(uri: str):
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise UsageError(f"to: mlflow needs the export extra (pip install -e '.[export]'): {e}") \
            from e
    return MlflowClient(tracking_uri=uri)


def _experiment(client, name: str, known: dict[str, str]) -> str:
    if name not in known:
        found = client.get_experiment_by_name(name)
        if found is None:
            try:
                known[name] = client.create_experiment(name)
            except Exception:  # made meanwhile by another export
                found = client.get_experiment_by_name(name)
                if found is None:
                    raise
        if found is not None:
            known[name] = found.experiment_id
    return known[name]


def existing(client, experiment_id: str, label: str) -> dict[str, list[Any]]:
    """benchlib.run_id -> the runs of result set `label` in the experiment (searched once
    for the set, by its label tag, page by page)."""
    found: dict[str, list[Any]] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], f"tags.`benchlib.label` = '{label}'",
                                  max_results=1000, page_token=token)
        for run in page:
            found.setdefault(run.data.tags.get("benchlib.run_id", ""), []).append(run)
        token = page.token
        if not token:
            return found


def _artifacts(client, run_id: str, record: dict[str, Any], results_dir: Path) -> None:
    """The record file (as stored; as read, where its file is elsewhere) and the executed
    notebook, when it is there."""
    stored = results.record_path(results_dir, record["table"], record["run_id"])
    with tempfile.TemporaryDirectory(prefix="benchlib-export-") as tmp:
        if not stored.is_file():
            stored = Path(tmp) / f"{record['run_id']}.json"
            stored.write_text(json.dumps(record, indent=2, sort_keys=True))
        client.log_artifact(run_id, str(stored), "record")
    notebook = record.get("executed_notebook")
    if notebook and (results_dir.parent / notebook).is_file():
        client.log_artifact(run_id, str(results_dir.parent / notebook), "notebook")


@contextlib.contextmanager
def _quiet():
    name = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
    before = os.environ.get(name)
    os.environ[name] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _create(client, experiment_id: str, record: dict[str, Any], results_dir: Path,
            name: str) -> None:
    """The record's run, written whole or deleted."""
    from mlflow.entities import Metric, Param

    run = client.create_run(experiment_id, start_time=_ms(record["started_at"]),
                            tags=tags(record), run_name=name)
    run_id = run.info.run_id
    try:
        when = _ms(record["finished_at"])
        ms = [Metric(k, v, when, 0) for k, v in metrics(record).items()]
        ps = [Param(k, v) for k, v in params(record).items()]
        for i in range(0, max(len(ms), len(ps), 1), 100):  # MLflow takes 100 params a batch
            client.log_batch(run_id, metrics=ms[i:i + 100], params=ps[i:i + 100])
        _artifacts(client, run_id, record, results_dir)
        with _quiet():  # set_terminated prints a link to each run on stdout
            client.set_terminated(run_id, "FINISHED", end_time=when)
    except BaseException:
        with contextlib.suppress(Exception):  # the error that stopped it is the one to tell
            client.delete_run(run_id)
        raise


def export(records: list[dict[str, Any]], results_dir: Path, uri: str) -> list[str]:
    """A run per record on the server at `uri` (checked reachable first); the lines to print."""
    uri = check_reachable(uri)
    client = _client(uri)
    from mlflow.exceptions import MlflowException

    # a run is named by its row's parameters that vary (its experiment is its table)
    names = {id(r): name.partition(": ")[2] or name
             for name, recs in figures.rows(records).items() for r in recs}
    known: dict[str, str] = {}
    runs: dict[str, dict[str, list[Any]]] = {}
    made = kept = 0
    try:
        for record in records:
            exp = _experiment(client, f"benchlib/{record['table']}", known)
            if exp not in runs:
                runs[exp] = existing(client, exp, record["label"])
            found = runs[exp].get(record["run_id"], [])
            if any(r.info.status == "FINISHED" for r in found):
                kept += 1
                continue
            for stale in found:  # an earlier export stopped half-way
                client.delete_run(stale.info.run_id)
            _create(client, exp, record, results_dir, names[id(record)])
            made += 1
    except MlflowException as e:
        raise BenchlibError(f"tracking_uri: {uri} refused the export after {made} new runs: "
                            f"{str(e).splitlines()[0]}") from e
    return [f"mlflow: {made} runs created, {kept} already there (tag benchlib.run_id), at {uri} "
            f"in {', '.join(sorted(known))}"]
