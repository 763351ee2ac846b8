"""Run a plan of rows through papermill's Python API, one kernel per row.

For each row: skip it if an ok record exists; otherwise execute the notebook into
outputs/runs/<table>/<run_id>.ipynb (written beside it under a temporary name and
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

from benchlib import atomic, paths
from benchlib.config import studies
from benchlib.core import envinfo, hostload
from benchlib.errors import RecordError
from benchlib.records import results, testbed
from benchlib.runs import kernels, warm_kernels
from benchlib.runs.params import Row

KERNEL = "python3"  # jupyter_client runs it with this interpreter, so .venv's packages


@dataclass
class Summary:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    elsewhere: int = 0  # rows another sweep finished or is running
    row_s: list[float] = field(default_factory=list)  # wall time of each executed row
    failures: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        per_row = f", {sum(self.row_s) / len(self.row_s):.2f} s per row" if self.row_s else ""
        other = f", {self.elsewhere} done or running in another sweep" if self.elsewhere else ""
        return f"{self.ok} ok, {self.failed} failed, {self.skipped} skipped{other}{per_row}"

    def count(self, row: Row, record: dict[str, Any], outputs: Path,
              slurm_log: str | None = None) -> None:
        if record["status"] == "ok":
            self.ok += 1
            return
        self.failed += 1
        notebook = record.get("executed_notebook")
        self.failures.append({"source": row.source, "run_id": row.run_id,
                              "error": record["error"], "slurm_log": slurm_log,
                              "executed_notebook": str(outputs / notebook) if notebook else None})


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
            timeout_s: float | None = None, warm: bool = False) -> dict[str, Any] | None:
    """Run `notebook` into `output` (renamed into place when done, even on failure), in a
    kernel forked by the sweep's warm-kernel server when `warm` and one runs.
    Returns None when it ran through, else the error."""
    import papermill

    with atomic.replacing(output, suffix=".tmp.ipynb") as tmp, paths.environment(env), \
            kernels.kernel_folder() as folder:
        try:
            papermill.execute_notebook(
                str(notebook), str(tmp), parameters=parameters, kernel_name=KERNEL,
                language="python", progress_bar=False, cwd=str(notebook.parent),
                execution_timeout=timeout_s,
                kernel_manager_class=kernels.manager_class(folder, warm),
                # the record and the notebook are written by then: a graceful shutdown
                # only waited 1.4-2.5 s a row for a kernel holding torch to exit (0.1-0.2 s
                # now: scripts/row_times.py, a row's "rest" column, 3 IO rows here)
                shutdown_kernel="immediate",
            )
        except Exception as exc:  # the notebook's failure is the run's result
            return error_of(exc)
    return None


def kernel_parameters(row: Row) -> dict[str, Any]:
    """What papermill gives the row's kernel: every parameter, as the config the row built
    holds it (the kernel's `from_params(globals())` builds the same config from exactly
    these values, the executed notebook shows them all, and the record stores them as its
    params); a notebook without a config gets the table's, beside its own defaults."""
    return dict(row.params) if row.config is not None else dict(row.overrides)


def run_row(row: Row, outputs: Path, executor: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute one row and write its record; returns the record. `executor` says where it
    ran (a Slurm array task's job id and log); a failure's error names that log too.
    The record, executed notebook and logs take an id no ok record has
    (results.free_run_id): a rerun adds to the row's history."""
    if row.testbed is None or not row.label:
        [row] = results.assign_result_set([row], outputs / "results", row.label or None,
                                           row.testbed)
    run_id = results.free_run_id(outputs / "results", row.table, row.run_id, row.label)
    rel_notebook = Path("runs") / row.table / f"{run_id}.ipynb"
    metrics_file = outputs / "runs" / row.table / f".{run_id}.metrics.json"
    metrics_file.unlink(missing_ok=True)
    started_at, load_start = results.now(), hostload.sample()
    kernel_env = {
        results.METRICS_FILE_VAR: str(metrics_file),
        "BENCHLIB_OUTPUTS": str(outputs),
        results.RUN_ID_VAR: run_id,
        "BENCHLIB_TABLE": row.table,
        "BENCHLIB_STUDY": studies.of_notebook(row.notebook.name),
    }
    error = execute(row.notebook, outputs / rel_notebook, kernel_parameters(row), kernel_env,
                    row.timeout_s, warm=warm_kernels.wanted(studies.warm_kernel(row.notebook.name)))
    load = hostload.span(load_start, hostload.sample())
    published = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    metrics_file.unlink(missing_ok=True)
    fields = dict(run_id=run_id, table=row.table, notebook=row.notebook.name,
                  params=row.params, params_raw=row.params_raw, env=envinfo.collect(),
                  started_at=started_at,
                  executed_notebook=str(rel_notebook), executor=executor, label=row.label,
                  testbed=testbed.where_it_ran(row.testbed), host_load=load)
    if error and executor and executor.get("log"):
        error["log"] = executor["log"]
    try:
        record = results.make_record(
            **fields, status="failed" if error else "ok", error=error,
            metrics=published.get("metrics"), details=published.get("details"))
    except RecordError as e:  # what the notebook published cannot be stored as given
        record = results.make_record(
            **fields, status="failed", error={"type": "RecordError", "message": str(e)})
    results.write_record(outputs / "results", record)
    return record


def pending(rows: list[Row], outputs: Path, force: bool = False,
            label: str | None = None) -> list[Row]:
    """Rows without an ok record on their testbed, in result set `label` if given (else
    in any); all of them with `force`."""
    if force:
        return list(rows)
    return [r for r in rows
            if not results.has_ok_record(outputs / "results", r.table, r.run_id, label)]


@contextlib.contextmanager
def claim(row: Row, outputs: Path, force: bool = False, label: str | None = None):
    """Yield True when this process may run `row`: no ok record (unless `force`; in result
    set `label` if given), and no other sweep holding it. The hold is an flock on
    `.<run_id>.lock`, which the kernel drops when its holder dies, even by SIGKILL: two
    sweeps on the same outputs/ split the rows, and a killed sweep's row is free for the
    next one at once."""
    import fcntl

    lock = outputs / "runs" / row.table / f".{row.run_id}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another sweep runs this row now
            os.close(fd)
            yield False
            return
        try:  # still the file at that path (its last holder may have removed it meanwhile)
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        # done meanwhile?
        mine = force or not results.has_ok_record(outputs / "results", row.table, row.run_id,
                                                  label)
        if mine:
            for half in lock.parent.glob(f".{row.run_id}*.ipynb.*"):  # left by a killed sweep
                half.unlink(missing_ok=True)
        yield mine
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


def run_plan(rows: list[Row], outputs: Path, force: bool = False,
             progress: bool = True, label: str | None = None) -> Summary:
    """Run the rows not done yet on this testbed (in result set `label`, when given; new
    records join it, else this testbed's default set)."""
    from benchlib.core import progress as progress_bar

    rows = results.assign_result_set(rows, outputs / "results", label)
    todo = pending(rows, outputs, force, label)
    summary = Summary(skipped=len(rows) - len(todo))
    if todo:  # one-off costs, paid before the first row's clock starts
        import papermill  # noqa: F401

        envinfo.collect()
    bar = progress_bar.bar(len(rows), "sweep", unit="row", enabled=progress,
                           initial=summary.skipped)
    warm = sum(warm_kernels.wanted(studies.warm_kernel(r.notebook.name)) for r in todo) > 1
    with warm_kernels.serving() if warm else contextlib.nullcontext():
        for row in todo:
            _run_claimed(row, outputs, force, label, summary, bar)
    bar.close()
    return summary


def _run_claimed(row: Row, outputs: Path, force: bool, label: str | None, summary: Summary,
                 bar) -> None:
    with claim(row, outputs, force, label) as mine:
        if not mine:  # finished meanwhile, or running in another sweep
            summary.elsewhere += 1
            bar.update()
            return
        start = time.perf_counter()
        record = run_row(row, outputs)
        summary.row_s.append(time.perf_counter() - start)
    summary.count(row, record, outputs)
    bar.set_postfix(ok=summary.ok, failed=summary.failed, skipped=summary.skipped,
                    last=f"{summary.row_s[-1]:.1f}s")
    bar.update()
