"""What a partition holds (sinfo) and whether a layout fits it: the one capacity check,
made once on the submitting side (a Slurm sweep, `benchlib slurm-script`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from benchlib.config.base import require_choice, require_min
from benchlib.errors import ConfigError

# srun torchrun (one agent per node: ddp, elastic) or srun python, one task per device
TRAINERS = ("ddp", "elastic", "lightning")


def node_capacity(partition: str | None = None) -> dict[str, int] | None:
    """What a partition holds: its number of nodes, and the CPUs and GPUs of its smallest
    node (from sinfo). Without `partition`: the job's own partition inside a job, else the
    cluster's default one (what sbatch would use). None when there is no Slurm here to
    ask, or no such partition (sbatch then says so itself)."""
    argv = ["sinfo", "-N", "-h", "-o", "%N %c %P %G"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return None  # no Slurm here: nothing to check against, nothing to say
    except subprocess.TimeoutExpired:
        return _unchecked("sinfo did not answer within 30 s")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return _unchecked(f"sinfo failed: {last}")
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


def _unchecked(why: str) -> None:
    """Slurm is here but would not say what the partition holds: go on, and say so."""
    print(f"benchlib: partition capacity not checked ({why}); sbatch will judge the layout",
          file=sys.stderr)
    return None


def check_layout(trainer: str, nodes: int, devices: int, ntasks_per_node: int | None = None,
                 world_size: int | None = None, gpu: bool = False,
                 capacity: dict[str, int] | None = None) -> int:
    """Refuse a layout that cannot work, saying what to change; returns ntasks-per-node.

    Lightning under Slurm expects one task per device on every node: with fewer, the
    ranks it waits for never start and the job hangs until its time limit (Lightning
    issues 8707, 10098, 20391). torchrun under srun is one task (agent) per node."""
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
