"""Run a plan of rows through papermill's Python API, one kernel per row.

For each row: skip it if an ok record exists; otherwise execute the notebook into
outputs/runs/<study>/<run_id>.ipynb (written beside it under a temporary name and
renamed when the kernel is done, so a killed sweep leaves no half notebook), collect
what the notebook published, and write the record. A row that raises is recorded as
failed, with its error and executed notebook, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import atomic, envinfo, results
from benchlib.params import Row

KERNEL = "python3"  # jupyter_client runs it with this interpreter, so .venv's packages


def _ipc_kernel_manager():
    """A kernel manager talking to its kernel over Unix sockets: no TCP ports opened on a
    shared node, and no warning about unencrypted TCP for every row."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", **kwargs)

    return IPCKernelManager


@dataclass
class Summary:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    row_s: list[float] = field(default_factory=list)  # wall time of each executed row
    failures: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        per_row = f", {sum(self.row_s) / len(self.row_s):.2f} s per row" if self.row_s else ""
        return f"{self.ok} ok, {self.failed} failed, {self.skipped} skipped{per_row}"


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    """Set variables for the kernel about to start (it copies os.environ), then restore."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _last_line(text: Any, default: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[-1] if lines else default


def error_of(exc: BaseException) -> dict[str, Any]:
    """A notebook's failure as a record's `error`: type, last line of the message, cell."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        return {"type": exc.ename, "message": _last_line(exc.evalue, exc.ename),
                "cell_index": exc.cell_index, "exec_count": exc.exec_count}
    return {"type": type(exc).__name__, "message": _last_line(exc, type(exc).__name__)}


def execute(notebook: Path, output: Path, parameters: dict[str, Any], env: dict[str, str],
            timeout_s: float | None = None) -> dict[str, Any] | None:
    """Run `notebook` into `output` (renamed into place when done, even on failure).
    Returns None when it ran through, else the error."""
    import papermill

    with atomic.replacing(output, suffix=".tmp.ipynb") as tmp, _environ(env):
        try:
            papermill.execute_notebook(
                str(notebook), str(tmp), parameters=parameters, kernel_name=KERNEL,
                progress_bar=False, cwd=str(notebook.parent), execution_timeout=timeout_s,
                kernel_manager_class=_ipc_kernel_manager(),
            )
        except Exception as exc:  # the notebook's failure is the run's result
            return error_of(exc)
    return None


def run_row(row: Row, outputs: Path, executor: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute one row and write its record; returns the record. `executor` says where it
    ran (a Slurm array task's job id and log); a failure's error names that log too."""
    rel_notebook = Path("runs") / row.study / f"{row.run_id}.ipynb"
    metrics_file = outputs / "runs" / row.study / f".{row.run_id}.metrics.json"
    metrics_file.unlink(missing_ok=True)
    started_at = results.now()
    kernel_env = {
        results.METRICS_FILE_VAR: str(metrics_file),
        "BENCHLIB_OUTPUTS": str(outputs),
        results.RUN_ID_VAR: row.run_id,
        "BENCHLIB_STUDY": row.study,
    }
    error = execute(row.notebook, outputs / rel_notebook, row.overrides, kernel_env, row.timeout_s)
    published = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    metrics_file.unlink(missing_ok=True)
    fields = dict(run_id=row.run_id, study=row.study, notebook=row.notebook.name,
                  params=row.params, env=envinfo.collect(), started_at=started_at,
                  executed_notebook=str(rel_notebook), executor=executor)
    if error and executor and executor.get("log"):
        error["log"] = executor["log"]
    try:
        record = results.make_record(
            **fields, status="failed" if error else "ok", error=error,
            metrics=published.get("metrics"), details=published.get("details"))
    except ValueError as e:  # what the notebook published cannot be stored as given
        record = results.make_record(
            **fields, status="failed", error={"type": "ValueError", "message": str(e)})
    results.write_record(outputs / "results", record)
    return record


def pending(rows: list[Row], outputs: Path, force: bool = False) -> list[Row]:
    """Rows without an ok record (all of them with `force`)."""
    if force:
        return list(rows)
    todo = []
    for r in rows:
        rec = results.find_record(outputs / "results", r.study, r.run_id)
        if not (rec and rec["status"] == "ok"):
            todo.append(r)
    return todo


def run_plan(rows: list[Row], outputs: Path, force: bool = False,
             progress: bool = True) -> Summary:
    from tqdm.auto import tqdm

    todo = pending(rows, outputs, force)
    summary = Summary(skipped=len(rows) - len(todo))
    if todo:  # one-off costs, paid before the first row's clock starts
        import papermill  # noqa: F401

        envinfo.collect()
    bar = tqdm(total=len(rows), initial=summary.skipped, unit="row", disable=not progress,
               desc="sweep")
    for row in todo:
        start = time.perf_counter()
        record = run_row(row, outputs)
        summary.row_s.append(time.perf_counter() - start)
        if record["status"] == "ok":
            summary.ok += 1
        else:
            summary.failed += 1
            summary.failures.append({
                "source": row.source, "run_id": row.run_id, "error": record["error"],
                "executed_notebook": str(outputs / record["executed_notebook"]),
            })
        bar.set_postfix(ok=summary.ok, failed=summary.failed, skipped=summary.skipped,
                        last=f"{summary.row_s[-1]:.1f}s")
        bar.update()
    bar.close()
    return summary
