"""The sbatch scripts benchlib renders (replacing seed 000's srun_ddp.sh and
srun_lightning.sh): a Job's #SBATCH lines, and a multi-node training script checked
against the partition before anything is submitted.

Everything a user passes ends up shell-quoted in a rendered script; the only shell the
script expands itself is benchlib's own (`$SLURM_JOB_ID`, the allocation's first host).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from benchlib.config.choices import DEFAULT_PORT
from benchlib.errors import PREEMPTED_EXIT_CODE, ConfigError
from benchlib.launch.argv import Shell, render, srun_argv
from benchlib.slurm.capacity import check_layout, node_capacity

_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:,%@=/+\-\[\]]+$")  # what an #SBATCH line may hold


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
            "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}",
            *importable_on_every_node(worker_args, nodes, python),
            *preemption_aware(render(argv), requeue)]
    return script(job, body)


OWN_CODE_FLAGS = {"--model": "model", "--dataset": "dataset", "--loss": "loss",
                  "--collate": "collate"}


def importable_on_every_node(worker_args: list[str], nodes: int, python: str) -> list[str]:
    """A model, data set or loss of the user's (an entry point, or a timm:/hf: model) must
    import on every node: one task per node checks it before the ranks start, and the
    script ends with exit 2 and the check's one line if a node cannot."""
    pairs = [f"{OWN_CODE_FLAGS[flag]}={value}" for flag, value in zip(worker_args, worker_args[1:])
             if flag in OWN_CODE_FLAGS and ":" in str(value)]
    if not pairs:
        return []
    check = render(["srun", "--nodes", str(nodes), "--ntasks-per-node", "1", python, "-m",
                    "benchlib.core.entrypoints", *pairs])
    return [f"{check} || exit 2"]


def preemption_aware(command: str, requeue: bool) -> list[str]:
    """`command`, with the script's exit status saying preemption: 75 when the ranks
    stopped at a checkpoint (their agents exit 75) or Slurm sent this script SIGTERM (it
    waits for the step, then exits); with `requeue`, it then puts the job back in the queue."""
    again = ['    scontrol requeue "$SLURM_JOB_ID" || echo "benchlib: scontrol requeue failed" >&2']
    return ["preempted=0",
            "trap 'preempted=1; echo \"benchlib: SIGTERM: waiting for the ranks to checkpoint\" >&2' TERM",
            "status=0",
            f"{command} || status=$?",
            f'if [ "$status" -eq {PREEMPTED_EXIT_CODE} ] || [ "$preempted" -eq 1 ]; then',
            f'    echo "benchlib: preempted (step exit $status); exit {PREEMPTED_EXIT_CODE}: '
            f'{"requeued" if requeue else "submit it again"} to resume" >&2',
            *(again if requeue else []),
            f"    exit {PREEMPTED_EXIT_CODE}",
            "fi",
            'exit "$status"']
