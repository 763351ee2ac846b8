"""A sweep on Slurm: the pending rows become job arrays, one task per row and one array per
shape of allocation.

Each task runs `python -m benchlib slurm-task PLAN INDEX`, which executes its row with
papermill exactly as a local sweep does (`sweep.run_row`) into the shared outputs/, so
records, executed notebooks and the report are the same either way. The submitting
process polls `squeue` (not `sbatch --wait`, which polls slowly), then reads what each
task left; a task that died without writing its record (time limit, node failure,
cancelled) gets a failed record naming its Slurm state and log.

An array asks for one shape of allocation for all its tasks, so the rows are grouped by
the shape they need (a row with `launcher: srun` needs `nnodes` nodes and `nproc_per_node`
tasks per node; any other row one node): a 1-node row does not hold the 4 nodes of the
sweep's largest row. Every array asks for whole nodes (`--exclusive`) unless told not to:
two rows sharing a node's cores measure each other (seen here: 10x lower samples/s when
two array tasks shared them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from benchlib import atomic, paths
from benchlib.config import CONFIGS, DataPrepConfig, MultinodeLightningConfig, StudyConfig
from benchlib.config.choices import MADE_ON_DEVICE, dataset_kind
from benchlib.core import envinfo
from benchlib.data.manifest import describe
from benchlib.errors import ConfigError, SlurmError, UsageError
from benchlib.records import results, testbed
from benchlib.runs.params import Row
from benchlib.runs.sweep import Summary, pending, run_row
from benchlib.slurm import arrays, commands
from benchlib.slurm.capacity import check_layout, node_capacity
from benchlib.slurm.sbatch import check_directive

SQUEUE_PATIENCE_S = 120.0  # how long the poller waits out a squeue that keeps failing


def check_submission(rows: list[Row], partition: str | None, time_limit: str | None) -> None:
    """Everything the submitting side refuses, checked before anything is written or
    queued; `sweep --dry-run` makes the same checks: the values given for sbatch, the srun
    rows' layouts against the partition, the data the rows read."""
    if partition:  # what the arrays' #SBATCH lines will hold (an empty one is left out)
        check_directive("partition", partition)
    if time_limit:
        check_directive("time", time_limit)
    check_partition(rows, partition)
    check_data(rows)


def check_partition(rows: list[Row], partition: str | None) -> None:
    """The submit-side check, made once: the srun rows' layouts against the partition the
    sweep goes to (None: the cluster's default one), read from the config each row built.
    The rest is each row's preflight, run by its array task on the node it gets."""
    capacity = node_capacity(partition)
    for row in rows:
        cfg = row.config
        if isinstance(cfg, MultinodeLightningConfig) and cfg.launcher == "srun":
            try:
                check_layout(cfg.trainer, cfg.nnodes, cfg.nproc_per_node,
                             gpu=cfg.device == "gpu", capacity=capacity)
            except ConfigError as e:
                raise UsageError(f"{row.source}: {e} (partition {partition or 'default'})") from e


NO_DATA = (*MADE_ON_DEVICE, "dummy")  # made in the process: nothing to prepare


def check_data(rows: list[Row]) -> None:
    """The other submit-side check: every data set the rows' configs read is prepared where
    they will look for it (`path`, resolved as the tasks resolve it: `outputs/...` under
    $BENCHLIB_OUTPUTS), so no array task fails on missing data after it was queued. A
    data_prep row makes the data the others read; a data set of the user's own is theirs."""
    seen: set[tuple[Path, str]] = set()
    for row in rows:
        cfg = row.config
        if not hasattr(cfg, "path") or not hasattr(cfg, "dataset") \
                or isinstance(cfg, DataPrepConfig) or cfg.dataset in NO_DATA \
                or dataset_kind(cfg.dataset) == "entry":
            continue
        key = (paths.resolve(cfg.path), cfg.dataset)
        if key in seen:
            continue
        seen.add(key)
        try:
            describe(cfg.path, cfg.dataset)
        except UsageError as e:
            raise UsageError(f"{row.source}: {e} (checked before submitting: the array "
                             "tasks read the same path)") from e


def write_plan(rows: list[Row], path: Path) -> None:
    """The rows for the array tasks, each with the config it built: its class and values."""
    plan = [{**{f.name: getattr(r, f.name) for f in fields(r) if f.name != "config"},
             "notebook": str(r.notebook),
             "config": None if r.config is None else {"class": type(r.config).__name__,
                                                      "values": r.config.as_dict()}}
            for r in rows]
    atomic.write_json(path, {"rows": plan})


def read_plan(plan: Path) -> list[Row]:
    """The rows of a plan a Slurm sweep wrote, each with its config made again from the
    values the submitting side built it with; a file that is not one is a UsageError."""
    try:
        return [Row(r["table"], Path(r["notebook"]), r["params"], r["overrides"], r["source"],
                    r["timeout_s"], r.get("testbed"), r.get("label", ""), _config(r),
                    r.get("raw", {}))
                for r in json.loads(Path(plan).read_text())["rows"]]
    except OSError as e:
        raise UsageError(f"plan: cannot read {plan} ({e.strerror})") from None
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        raise UsageError(f"plan: {plan} is not a Slurm sweep's plan.json "
                         f"({type(e).__name__}: {e})") from None


def _config(row: dict[str, Any]) -> StudyConfig | None:
    """A plan row's config, from its class's name and values (None: a notebook without)."""
    saved = row.get("config")
    return None if saved is None else CONFIGS[saved["class"]](**saved["values"])


def read_row(plan: Path, index: int) -> Row:
    rows = read_plan(plan)
    if not 0 <= index < len(rows):
        raise UsageError(f"index: {index} is outside the plan's {len(rows)} rows")
    return rows[index]


def run_task(plan: Path, index: int, outputs: Path) -> int:
    """One array task: its row, recorded like a local row, plus where Slurm logged it."""
    row = read_row(plan, index)
    record = run_row(row, outputs, executor=_task_info(plan.parent, index))
    return 0 if record["status"] == "ok" else 1


def _task_info(sweep_dir: Path, index: int) -> dict[str, Any]:
    return {"name": "slurm", "job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
            "array_task_id": index, "node": os.environ.get("SLURMD_NODENAME"),
            "log": str(sweep_dir / f"row-{index}.log")}


def submit_arrays(rows: list[Row], sweep_dir: Path, outputs: Path, partition: str | None,
                  time_limit: str | None, requeue: bool, exclusive: bool) -> dict[str, list[int]]:
    """Write and submit one array per shape (`array-<nodes>x<tasks>[-<g>gpu].sbatch`);
    job id -> plan indices. If sbatch refuses one, those already queued are cancelled."""
    capacity = node_capacity(partition)
    jobs: dict[str, list[int]] = {}
    try:
        groups = arrays.shape_groups([r.params for r in rows], capacity["gpus"] if capacity else 0)
        for shape, indices in groups.items():
            nodes, tasks, gpus = shape
            path = sweep_dir / f"array-{nodes}x{tasks}{f'-{gpus}gpu' if gpus else ''}.sbatch"
            path.write_text(arrays.array_script(rows[indices[0]].table, indices, shape, sweep_dir,
                                                outputs, partition, time_limit, requeue,
                                                exclusive))
            jobs[commands.submit(path)] = indices
    except BaseException:
        for job_id in jobs:
            with contextlib.suppress(SlurmError):  # the refusal is what to report
                commands.cancel(job_id)
        raise
    return jobs


def run_plan(rows: list[Row], outputs: Path, partition: str | None = None,
             time_limit: str | None = None, force: bool = False, progress: bool = True,
             poll_s: float = 0.5, requeue: bool = False, exclusive: bool = True,
             label: str | None = None) -> Summary:
    check_submission(rows, partition, time_limit)
    # the partition is the testbed: two partitions sharing these outputs never mix
    rows = results.assign_result_set(rows, outputs / "results", label,
                                     testbed.slurm(partition))
    todo = pending(rows, outputs, force, label)
    summary = Summary(skipped=len(rows) - len(todo))
    todo = _not_queued_twice(todo, outputs, summary)
    if not todo:
        return summary
    sweep_dir, jobs, submitted = _submit(todo, outputs, partition, time_limit, requeue,
                                         exclusive)
    states = _wait(jobs, len(rows), len(rows) - len(todo), progress, poll_s)
    _count_rows(todo, jobs, states, sweep_dir, outputs, submitted, summary)
    return summary


def _not_queued_twice(todo: list[Row], outputs: Path, summary: Summary) -> list[Row]:
    """`todo` less the rows an earlier submission still has in the queue (its poller was
    stopped, say), which are said and counted: not submitted twice, even with force, as
    two tasks would run one row into the same files."""
    live = queued_elsewhere(outputs)
    if elsewhere := [r for r in todo if r.run_id in live]:
        jobs = " ".join(sorted({live[r.run_id] for r in elsewhere}))
        print(f"{len(elsewhere)} row(s) already queued or running in Slurm job(s) {jobs} of an "
              f"earlier sweep: not submitted again; run the sweep again once they end",
              file=sys.stderr)
        summary.elsewhere = len(elsewhere)
        todo = [r for r in todo if r.run_id not in live]
    return todo


def _submit(todo: list[Row], outputs: Path, partition: str | None, time_limit: str | None,
            requeue: bool, exclusive: bool) -> tuple[Path, dict[str, list[int]], str]:
    """A new sweep folder under outputs/slurm with the plan, its arrays submitted and their
    job ids written: (the folder, job id -> plan indices, when submitted). Nothing is left
    behind when the submission fails."""
    sweep_dir = outputs / "slurm" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    sweep_dir.mkdir(parents=True)
    write_plan(todo, sweep_dir / "plan.json")
    submitted = results.now()
    try:
        jobs = submit_arrays(todo, sweep_dir, outputs, partition, time_limit, requeue, exclusive)
    except BaseException:
        shutil.rmtree(sweep_dir)  # nothing is queued: leave no plan behind either
        raise
    (sweep_dir / "job_ids").write_text("\n".join(jobs) + "\n")
    return sweep_dir, jobs, submitted


def _wait(jobs: dict[str, list[int]], total: int, done: int, progress: bool,
          poll_s: float) -> dict[str, dict[str, str]]:
    """Poll squeue, with a progress bar over the sweep's `total` rows, until every array
    has left the queue; job id -> its tasks' final states. Stopped (or squeue failing for
    over SQUEUE_PATIENCE_S), it says that the jobs go on and how to cancel them."""
    from benchlib.core import progress as progress_bar

    ids, several = " ".join(jobs), len(jobs) > 1
    bar = progress_bar.bar(total, f"sweep (Slurm job{'s' if several else ''} {ids})",
                           unit="row", enabled=progress, initial=done)
    left = {job_id: len(indices) for job_id, indices in jobs.items()}
    states: dict[str, dict[str, str]] = {}
    failing_since = None  # squeue failing: slurmctld restarting, say; give it a while
    try:
        while left:
            time.sleep(poll_s)
            try:
                for job_id in list(left):
                    now_left = len(commands.queued(job_id))
                    bar.update(left[job_id] - now_left)
                    left[job_id] = now_left
                    if not now_left:  # done: its states now, before Slurm forgets the job
                        states[job_id] = commands.final_states(job_id)  # (MinJobAge, 300 s)
                        del left[job_id]
                failing_since = None
            except SlurmError:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > SQUEUE_PATIENCE_S:
                    raise
    except (KeyboardInterrupt, SlurmError):
        what = f"Slurm jobs {ids} go on" if several else f"Slurm job {ids} goes on"
        print(f"\n{what} without this process (each row still writes its record); stop "
              f"{'them' if several else 'it'} with: scancel {ids}", file=sys.stderr)
        raise
    finally:
        bar.close()
    return states


def _count_rows(todo: list[Row], jobs: dict[str, list[int]], states: dict[str, dict[str, str]],
                sweep_dir: Path, outputs: Path, submitted: str, summary: Summary) -> None:
    """Each submitted row's record into the summary; a task that died before recording
    gets a failed record naming its Slurm state and log."""
    job_of = {index: job_id for job_id, indices in jobs.items() for index in indices}
    for index, row in enumerate(todo):
        record = results.find_record(outputs / "results", row.table, row.run_id, row.label)
        job_id = job_of[index]
        info = {**_task_info(sweep_dir, index), "job_id": job_id,
                "state": states[job_id].get(str(index), "UNKNOWN")}
        if record is None or record["finished_at"] < submitted:  # it died before recording
            record = _lost_row(row, outputs, info, submitted)
        summary.count(row, record, outputs, slurm_log=info["log"])


def queued_elsewhere(outputs: Path) -> dict[str, str]:
    """run_id -> job id, for the rows earlier sweeps on these outputs have in the queue now
    (pending or running). A job squeue no longer knows has ended."""
    live: dict[str, str] = {}
    for ids in (outputs / "slurm").glob("*/job_ids"):
        for job_id in ids.read_text().split():
            try:
                tasks = commands.queued(job_id)
            except SlurmError:
                continue
            plan = read_plan(ids.parent / "plan.json") if tasks else []
            live.update({plan[int(i)].run_id: job_id for i in tasks if i.isdigit()})
    return live


def _lost_row(row: Row, outputs: Path, info: dict[str, Any], started_at: str) -> dict:
    run_id = results.free_run_id(outputs / "results", row.table, row.run_id, row.label)
    record = results.make_record(
        run_id=run_id, table=row.table, notebook=row.notebook.name, params=row.params,
        params_raw=row.params_raw, env=envinfo.collect(), started_at=started_at, status="failed",
        label=row.label, testbed=row.testbed,
        error={"type": "SlurmTaskFailed",
               "message": f"array task {info['array_task_id']} of job {info['job_id']} ended "
                          f"{info['state']} without a record; log: {info['log']}"},
        executor=info)
    results.write_record(outputs / "results", record)
    return record
