"""A sweep's rows as Slurm job arrays: one array per shape of allocation (nodes, tasks
per node, GPUs per node) the rows need, one task per row, the task id being the row's
index in the plan. Every array asks for whole nodes (`--exclusive`) unless told not to:
two rows sharing a node's cores measure each other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchlib.launch.argv import Shell, render
from benchlib.slurm.sbatch import Job, preemption_aware, script


def row_shape(p: dict[str, Any], partition_gpus: int = 0) -> tuple[int, int, int]:
    """(nodes, tasks per node, GPUs per node) a row with parameters `p` needs inside its
    allocation: its own srun steps spread it over nodes; any other launcher runs it on the
    task's node. A `device: auto` row gets GPUs where the partition has them (else it
    would run on CPU)."""
    srun = p.get("launcher") == "srun"
    nodes = int(p.get("nnodes", 1)) if srun else 1
    tasks = int(p.get("nproc_per_node", 1)) if srun and p.get("trainer") == "lightning" else 1
    gpus = 0
    if p.get("device") == "gpu" or (p.get("device") == "auto" and partition_gpus):
        gpus = int(p.get("nproc_per_node", 1)) * (1 if srun else int(p.get("nnodes", 1)))
    return nodes, tasks, gpus


def shape_groups(params: list[dict[str, Any]],
                 partition_gpus: int = 0) -> dict[tuple[int, int, int], list[int]]:
    """Plan indices by the (nodes, tasks, GPUs per node) their rows need, in plan order."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for index, p in enumerate(params):
        groups.setdefault(row_shape(p, partition_gpus), []).append(index)
    return groups


def index_ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8": an --array value, however long the sweep."""
    spans: list[list[int]] = []
    for i in sorted(indices):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def array_script(study: str, indices: list[int], shape: tuple[int, int, int],
                 sweep_dir: Path, outputs: Path, partition: str | None, time_limit: str | None,
                 requeue: bool = False, exclusive: bool = True) -> str:
    """The array for plan rows `indices` (of `study`), which all need `shape`; task id =
    plan index; each task runs `python -m benchlib slurm-task PLAN INDEX`."""
    nodes, tasks, gpus = shape
    job = Job(f"benchlib-{study}"[:60], nodes, tasks,
                    str(sweep_dir / "row-%a.log"), partition, time_limit, gpus_per_node=gpus,
                    array=index_ranges(indices), requeue=requeue, exclusive=exclusive)
    task = [sys.executable, "-m", "benchlib", "slurm-task", str(sweep_dir / "plan.json"),
            Shell('"$SLURM_ARRAY_TASK_ID"')]
    # a task Slurm preempts exits 75 like a training script, and with --requeue goes back
    # in the queue: its row then runs again (a failed record of the set is replaced)
    return script(job, preemption_aware(render(task), requeue), {"BENCHLIB_OUTPUTS": str(outputs)})
