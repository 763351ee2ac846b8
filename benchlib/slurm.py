"""Slurm: the srun commands benchlib starts inside a job, the sbatch scripts it renders
(replacing seed 000's srun_ddp.sh and srun_lightning.sh), layout checks made before
anything is submitted, and the sbatch/squeue/scancel calls of sweeps on Slurm
(benchlib.slurm_sweep: a job array per allocation shape, one task per row).

Everything a user passes ends up shell-quoted in a rendered script; the only shell the
script expands itself is benchlib's own (`$SLURM_JOB_ID`, the allocation's first host).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchlib.config.choices import DEFAULT_PORT
from benchlib.errors import ConfigError, SlurmError
from benchlib.launch.argv import Shell, render, srun_argv

# srun torchrun (one agent per node: ddp, elastic) or srun python, one task per device
TRAINERS = ("ddp", "elastic", "lightning")
_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:,%@=/+\-\[\]]+$")  # what an #SBATCH line may hold


# ---------------------------------------------------------------------------- layouts

def node_capacity(partition: str | None = None) -> dict[str, int] | None:
    """What a partition holds: its number of nodes, and the CPUs and GPUs of its smallest
    node (from sinfo). Without `partition`: the job's own partition inside a job, else the
    cluster's default one (what sbatch would use). None when there is no Slurm here to
    ask, or no such partition (sbatch then says so itself)."""
    argv = ["sinfo", "-N", "-h", "-o", "%N %c %P %G"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    partition = partition or os.environ.get("SLURM_JOB_PARTITION")
    nodes: dict[str, tuple[int, int]] = {}  # a node is listed once per partition it is in
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        name, cpus, part, gres = (line.split(maxsplit=3) + ["(null)"])[:4]
        if part.rstrip("*") == partition if partition else part.endswith("*"):
            m = re.search(r"gpu(?::[^:,(]+)?:(\d+)", gres)
            nodes[name] = (int(cpus.rstrip("+")), int(m.group(1)) if m else 0)
    if not nodes:
        return None
    return {"nodes": len(nodes), "cpus": min(c for c, _ in nodes.values()),
            "gpus": min(g for _, g in nodes.values())}


def check_layout(trainer: str, nodes: int, devices: int, ntasks_per_node: int | None = None,
                 world_size: int | None = None, gpu: bool = False,
                 capacity: dict[str, int] | None = None) -> int:
    """Refuse a layout that cannot work, saying what to change; returns ntasks-per-node.

    Lightning under Slurm expects one task per device on every node: with fewer, the
    ranks it waits for never start and the job hangs until its time limit (Lightning
    issues 8707, 10098, 20391). torchrun under srun is one task (agent) per node."""
    from benchlib.config.base import require_choice, require_min

    require_choice("trainer", trainer, TRAINERS)
    require_min("nodes", nodes, 1)
    require_min("devices", devices, 1)
    wanted = devices if trainer == "lightning" else 1
    if ntasks_per_node is not None and ntasks_per_node != wanted:
        why = ("Lightning under Slurm starts one task per device" if trainer == "lightning"
               else "srun torchrun starts one agent per node, and the agent starts the ranks")
        raise ConfigError("ntasks_per_node", f"{ntasks_per_node} with devices {devices}: {why}; "
                          f"set ntasks-per-node = {wanted}")
    if world_size is not None and world_size != nodes * devices:
        raise ConfigError("world_size", f"{world_size} != nodes {nodes} x devices {devices} "
                          f"= {nodes * devices}; change nodes or devices")
    if capacity is not None:
        if nodes > capacity.get("nodes", nodes):  # sbatch would queue it, pending forever
            raise ConfigError("nodes", f"{nodes} asked for, but the partition has "
                              f"{capacity['nodes']}; use nodes <= {capacity['nodes']}")
        have = capacity["gpus"] if gpu else capacity["cpus"]
        if devices > have:
            what = "GPUs" if gpu else "CPUs (one process each)"
            raise ConfigError("devices", f"{devices} per node asked for, but the partition's "
                              f"smallest node has {have} {what}; use devices <= {have}")
    return wanted


def check_directive(name: str, value: str) -> str:
    """An #SBATCH value is not shell-quoted by sbatch: refuse anything but plain tokens."""
    if not _DIRECTIVE_VALUE.match(str(value)):
        raise ConfigError(name, f"{value!r} may only hold letters, digits and _.:,%@=/+-[]")
    return str(value)


@dataclass
class Job:
    """What an sbatch script asks for."""

    name: str
    nodes: int
    ntasks_per_node: int
    output: str
    partition: str | None = None
    time: str | None = None
    gpus_per_node: int = 0
    array: str | None = None
    requeue: bool = False
    exclusive: bool = True  # a benchmark owns its nodes: nothing else runs beside it

    def directives(self) -> list[str]:
        lines = [f"--job-name={check_directive('job_name', self.name)}",
                 f"--nodes={self.nodes}", f"--ntasks-per-node={self.ntasks_per_node}",
                 f"--output={check_directive('output', self.output)}"]
        if self.partition:
            lines.append(f"--partition={check_directive('partition', self.partition)}")
        if self.time:
            lines.append(f"--time={check_directive('time', self.time)}")
        if self.gpus_per_node:
            lines.append(f"--gpus-per-node={self.gpus_per_node}")
        if self.array:
            lines.append(f"--array={check_directive('array', self.array)}")
        # Slurm sends SIGTERM before it kills a job; --requeue puts it back in the queue
        lines.append("--requeue" if self.requeue else "--no-requeue")
        if self.exclusive:  # else other jobs (or the array's other tasks) share the cores
            lines.append("--exclusive")
        return [f"#SBATCH {d}" for d in lines]


def script(job: Job, body: list[str], environment: dict[str, str] | None = None) -> str:
    env_lines = [f"export {k}={shlex.quote(str(v))}" for k, v in (environment or {}).items()]
    return "\n".join(["#!/bin/bash", *job.directives(), "set -euo pipefail",
                      f"cd {shlex.quote(str(Path.cwd()))}", *env_lines, *body, ""])


def training_script(trainer: str, nodes: int, devices: int, worker_args: list[str],
                    output: str, partition: str | None = None, time: str | None = None,
                    gpu: bool = False, port: int = DEFAULT_PORT, requeue: bool = False,
                    python: str = sys.executable, check_capacity: bool = True,
                    max_restarts: int = 0, exclusive: bool = True,
                    ntasks_per_node: int | None = None, world_size: int | None = None) -> str:
    """An sbatch script running a training worker over `nodes` x `devices`: `srun
    torchrun` for DDP and the elastic trainer (with `max_restarts`, torchrun restarts the
    ranks after a failure), `srun python` (one task per device) for Lightning."""
    capacity = node_capacity(partition) if check_capacity else None
    tasks = check_layout(trainer, nodes, devices, ntasks_per_node, world_size, gpu, capacity)
    job = Job(f"benchlib-{trainer}", nodes, tasks, output, partition, time,
              devices if gpu else 0, requeue=requeue, exclusive=exclusive)
    if trainer == "lightning":
        argv = srun_argv("lightning", [*worker_args, "--devices", str(devices), "--nnodes",
                                       str(nodes)], nodes, devices, port, torchrun=False,
                         python=python)
    else:
        argv = srun_argv(trainer, worker_args, nodes, devices, port, max_restarts=max_restarts,
                         rdzv_id=Shell("$SLURM_JOB_ID"), head=Shell("$head_node"), python=python)
    body = ['head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}", render(argv)]
    return script(job, body)


# ---------------------------------------------------------------------------- sbatch

def _run(argv: list[str], timeout_s: float = 60) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as e:
        raise SlurmError(f"{argv[0]}: not found; is Slurm installed here (the client "
                         "commands sbatch, squeue, scontrol)?") from e
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        raise SlurmError(f"{' '.join(argv[:2])} failed ({out.returncode}): "
                         f"{said[-1] if said else 'no message'}")
    return out.stdout


def submit(script_path: Path) -> str:
    """sbatch --parsable; returns the job id."""
    return _run(["sbatch", "--parsable", str(script_path)]).strip().split(";")[0]


def cancel(job_id: str) -> None:
    _run(["scancel", job_id])


def queued(job_id: str) -> dict[str, str]:
    """Array task index (or job id) -> state, for what is still in the queue."""
    out = _run(["squeue", "-h", "-r", "-j", job_id, "-o", "%K %T"])
    states = {}
    for line in out.splitlines():
        index, state = line.split()
        states[index if index not in ("N/A", "") else job_id] = state
    return states


def final_states(job_id: str) -> dict[str, str]:
    """Array task index -> final JobState, from `scontrol show job` (kept for MinJobAge)."""
    try:
        out = _run(["scontrol", "-o", "show", "job", job_id])
    except SlurmError:
        return {}
    states = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        states[fields.get("ArrayTaskId", job_id)] = fields.get("JobState", "UNKNOWN")
    return states
