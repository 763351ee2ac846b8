"""A sweep on Slurm: the pending rows become one job array, one task per row.

Each task runs `python -m benchlib slurm-task PLAN INDEX`, which executes its row with
papermill exactly as a local sweep does (`sweep.run_row`) into the shared outputs/, so
records, executed notebooks and the report are the same either way. The submitting
process polls `squeue` (not `sbatch --wait`, which polls slowly), then reads what each
task left; a task that died without writing its record (time limit, node failure,
cancelled) gets a failed record naming its Slurm state and log.

An array asks for one shape of allocation for all its tasks: the largest any row needs
(a row with `launcher: srun` needs `nnodes` nodes and `nproc_per_node` tasks per node),
and whole nodes (`--exclusive`) unless asked not to: two rows sharing a node's cores
measure each other (seen here: 10x lower samples/s when two array tasks shared them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchlib import atomic, envinfo, results, slurm
from benchlib.params import Row
from benchlib.sweep import Summary, pending, run_row

def row_shape(row: Row) -> tuple[int, int]:
    """(nodes, tasks per node) the row's own srun steps need inside its allocation."""
    p = row.params
    if p.get("launcher") != "srun":
        return 1, 1
    tasks = p.get("nproc_per_node", 1) if p.get("trainer") == "lightning" else 1
    return int(p.get("nnodes", 1)), int(tasks)


def write_plan(rows: list[Row], path: Path) -> None:
    plan = [{**asdict(r), "notebook": str(r.notebook)} for r in rows]
    atomic.write_json(path, {"rows": plan})


def read_row(plan: Path, index: int) -> Row:
    rows = json.loads(Path(plan).read_text())["rows"]
    if not 0 <= index < len(rows):
        raise IndexError(f"index: {index} is outside the plan's {len(rows)} rows")
    r = rows[index]
    return Row(r["study"], Path(r["notebook"]), r["params"], r["overrides"], r["source"],
               r["timeout_s"])


def run_task(plan: Path, index: int, outputs: Path) -> int:
    """One array task: its row, recorded like a local row, plus where Slurm logged it."""
    row = read_row(plan, index)
    record = run_row(row, outputs, executor=_task_info(plan.parent, index))
    return 0 if record["status"] == "ok" else 1


def _task_info(sweep_dir: Path, index: int) -> dict[str, Any]:
    return {"name": "slurm", "job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
            "array_task_id": index, "node": os.environ.get("SLURMD_NODENAME"),
            "log": str(sweep_dir / f"row-{index}.log")}


def array_script(rows: list[Row], sweep_dir: Path, outputs: Path, partition: str | None,
                 time_limit: str | None, requeue: bool = False, exclusive: bool = True) -> str:
    nodes = max(row_shape(r)[0] for r in rows)
    tasks = max(row_shape(r)[1] for r in rows)
    job = slurm.Job(f"benchlib-{rows[0].study}"[:60], nodes, tasks,
                    str(sweep_dir / "row-%a.log"), partition, time_limit,
                    array=f"0-{len(rows) - 1}", requeue=requeue, exclusive=exclusive)
    task = [sys.executable, "-m", "benchlib", "slurm-task", str(sweep_dir / "plan.json"),
            slurm.Shell('"$SLURM_ARRAY_TASK_ID"')]
    return slurm.script(job, [slurm.render(task)], {"BENCHLIB_OUTPUTS": str(outputs)})


def run_plan(rows: list[Row], outputs: Path, partition: str | None = None,
             time_limit: str | None = None, force: bool = False, progress: bool = True,
             poll_s: float = 0.5, requeue: bool = False, exclusive: bool = True) -> Summary:
    from tqdm.auto import tqdm

    todo = pending(rows, outputs, force)
    summary = Summary(skipped=len(rows) - len(todo))
    if not todo:
        return summary
    sweep_dir = outputs / "slurm" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    sweep_dir.mkdir(parents=True)
    write_plan(todo, sweep_dir / "plan.json")
    script_path = sweep_dir / "array.sbatch"
    script_path.write_text(array_script(todo, sweep_dir, outputs, partition, time_limit, requeue,
                                        exclusive))
    submitted = results.now()
    try:
        job_id = slurm.submit(script_path)
    except BaseException:
        shutil.rmtree(sweep_dir)  # nothing was queued: leave no plan behind either
        raise
    (sweep_dir / "job_id").write_text(job_id + "\n")
    bar = tqdm(total=len(rows), initial=summary.skipped, unit="row", disable=not progress,
               desc=f"sweep (Slurm job {job_id})")
    left = len(todo)
    try:
        while left:
            time.sleep(poll_s)
            now_left = len(slurm.queued(job_id))
            bar.update(left - now_left)
            left = now_left
    except KeyboardInterrupt:
        print(f"\nSlurm job {job_id} goes on without this process (its rows still write their "
              f"records); stop it with: scancel {job_id}", file=sys.stderr)
        raise
    finally:
        bar.close()
    states = slurm.final_states(job_id)
    for index, row in enumerate(todo):
        record = results.find_record(outputs / "results", row.study, row.run_id)
        info = {**_task_info(sweep_dir, index), "job_id": job_id,
                "state": states.get(str(index), "UNKNOWN")}
        if record is None or record["finished_at"] < submitted:  # it died before recording
            record = _lost_row(row, outputs, info, submitted)
        summary.count(row, record, outputs, slurm_log=info["log"])
    return summary


def _lost_row(row: Row, outputs: Path, info: dict[str, Any], started_at: str) -> dict:
    record = results.make_record(
        run_id=row.run_id, study=row.study, notebook=row.notebook.name, params=row.params,
        env=envinfo.collect(), started_at=started_at, status="failed",
        error={"type": "SlurmTaskFailed",
               "message": f"array task {info['array_task_id']} of job {info['job_id']} ended "
                          f"{info['state']} without a record; log: {info['log']}"},
        executor=info)
    results.write_record(outputs / "results", record)
    return record
