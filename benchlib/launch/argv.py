"""Command lines, built and not run (pure): a worker as `python -m benchlib.workers.<m>`,
torchrun (one node standalone, several through a c10d rendezvous), srun over a Slurm
allocation, and the environment the ranks start with. Shell pieces the rendered Slurm
script expands itself (`$SLURM_JOB_ID`) are `Shell` strings; everything else is quoted."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from benchlib.core import hostload
from benchlib.distributed.env import first_host


class Shell(str):
    """Shell text the rendered script expands itself ("$SLURM_JOB_ID"): never user input."""


def render(argv: list[str]) -> str:
    """One command line; every argument quoted except benchlib's own Shell pieces."""
    return " ".join(a if isinstance(a, Shell) else shlex.quote(str(a)) for a in argv)


def worker_argv(module: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", f"benchlib.workers.{module}", *args]


def torchrun_argv(module: str, args: list[str], nproc_per_node: int, port: int,
                  nnodes: int = 1, node_rank: int | None = None, rdzv_id: str = "benchlib",
                  rdzv_host: str = "127.0.0.1", max_restarts: int = 0,
                  join_timeout_s: float | None = None,
                  agent_log_dir: Path | None = None) -> list[str]:
    """`torchrun` (as `python -m benchlib.launch.agent`: torch.distributed.run with this
    interpreter's torch, exiting 75 when preempted, where torchrun itself exits 1).
    One node: --standalone. Several: a c10d rendezvous at HOST:PORT, one agent per node;
    the agents wait `join_timeout_s` for every node (torchrun's default: 600 s).
    `agent_log_dir` keeps the agent's own files (its error.json per attempt) with the
    run; without it torchrun leaves a torchelastic_* folder in /tmp per launch."""
    argv = [sys.executable, "-m", "benchlib.launch.agent"]
    if nnodes == 1:
        argv += ["--standalone", "--nnodes", "1"]
    else:
        argv += ["--nnodes", str(nnodes), "--rdzv-backend", "c10d", "--rdzv-id", rdzv_id,
                 "--rdzv-endpoint", f"{rdzv_host}:{port}"]
        if node_rank is not None:
            argv += ["--node-rank", str(node_rank)]
        if join_timeout_s is not None:
            argv += ["--rdzv-conf", f"join_timeout={int(join_timeout_s)}"]
    if agent_log_dir is not None:
        argv += ["--log-dir", str(agent_log_dir)]
    argv += ["--nproc-per-node", str(nproc_per_node), "--max-restarts", str(max_restarts),
             "-m", f"benchlib.workers.{module}", *args]
    return argv


def thread_env(nproc: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks share the cores the job may use (its affinity and cgroup quota:
    hostload.job_cores, not the host's count, which a Slurm cpuset of 4 of 64 cores
    would oversubscribe 16 times): OMP_NUM_THREADS = cores // ranks, unless the user set
    it. torchrun alone would set 1, mp.spawn and tcp nothing; oversubscribed ranks on a
    CPU run several times slower, and that is not what a launcher costs."""
    env = dict(os.environ if env is None else env)
    env.setdefault("OMP_NUM_THREADS", str(max(1, hostload.job_cores() // nproc)))
    return env


# What a process started inside a Slurm job or by torchrun inherits and must not see when
# it is launched locally: Lightning and distributed.env.resolve() would take it for their own layout.
_FOREIGN_LAYOUT = ("SLURM*", "TORCHELASTIC_*", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                   "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def local_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if not any(k == f or (f.endswith("*") and k.startswith(f[:-1]))
                       for f in _FOREIGN_LAYOUT)}


def srun_argv(module: str, args: list[str], nnodes: int, nproc: int, port: int,
              torchrun: bool = True, max_restarts: int = 0, join_timeout_s: float | None = None,
              rdzv_id: str | None = None, head: str | None = None,
              python: str = sys.executable) -> list[str]:
    """`srun torchrun ...` (one agent per node, c10d rendezvous at the allocation's first
    host, id = the job id) or `srun python -m benchlib.workers.<module>` with one task per
    rank (distributed.env.resolve and Lightning map SLURM_* to ranks). `--kill-on-bad-exit=1`: one
    failed task stops the step instead of leaving the others waiting in a collective."""
    per_node = 1 if torchrun else nproc  # tasks: an agent per node, or a rank per device
    # --ntasks too: inside a bigger allocation srun would otherwise take the job's count
    srun = ["srun", "--nodes", str(nnodes), "--ntasks", str(nnodes * per_node),
            "--ntasks-per-node", str(per_node), "--kill-on-bad-exit=1",
            f"--export=ALL,MASTER_PORT={port}"]
    if not torchrun:
        return [*srun, python, "-m", f"benchlib.workers.{module}", *args]
    head = head or first_host()
    rdzv_id = rdzv_id or os.environ.get("SLURM_JOB_ID", "benchlib")
    endpoint = f"{head}:{port}"
    agent = torchrun_argv(module, args, nproc, port, max(nnodes, 2), None, rdzv_id, head,
                          max_restarts=max_restarts, join_timeout_s=join_timeout_s)
    # one node too goes through the c10d rendezvous at the first host (--standalone would
    # pick a port of its own); the script's own shell expands $SLURM_JOB_ID and the host
    agent[agent.index("--nnodes") + 1] = str(nnodes)
    shell = {endpoint: isinstance(head, Shell), rdzv_id: isinstance(rdzv_id, Shell)}
    agent = [Shell(f'"{a}"') if shell.get(a) else a for a in [python, *agent[1:]]]
    return [*srun, *agent]
