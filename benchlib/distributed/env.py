"""Process groups: who am I (rank, local rank, world size, master), which backend, and
timeouts on everything.

`resolve()` maps an environment to a `DistEnv` and is a pure function (tested with
plain dicts). It knows, in this order:

- torchrun (and any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT);
- Slurm tasks started by `srun python ...`: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
  the first host of SLURM_NODELIST (`scontrol show hostnames`) as master (seed 001);
- platforms that set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE once per *node*
  (seed 001's SenseCore: RANK is the node's rank, WORLD_SIZE the number of nodes);
  given the processes per node, each process's global rank follows;
- nothing: one process.

`tcp://HOST:PORT` with an explicit rank and world size is `from_tcp()` (seeds 002, 004).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from benchlib.config.choices import DEFAULT_PORT
from benchlib.errors import UsageError


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    source: str  # torchrun, env, slurm, platform, tcp or single

    @property
    def init_method(self) -> str:
        return f"tcp://{self.master_addr}:{self.master_port}" if self.source == "tcp" else "env://"

    def as_environ(self) -> dict[str, str]:
        """The variables env:// reads, for this process."""
        return {"RANK": str(self.rank), "LOCAL_RANK": str(self.local_rank),
                "WORLD_SIZE": str(self.world_size), "LOCAL_WORLD_SIZE": str(self.local_world_size),
                "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}


def check_rank(rank: int, world_size: int) -> None:
    if world_size < 1:
        raise UsageError(f"world_size: must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise UsageError(f"rank: must be in [0, {world_size}), got {rank}")


def check_port(port: int) -> None:
    if not 1024 <= port <= 65535:
        raise UsageError(f"port: must be in 1024-65535, got {port}")


def scontrol_hostnames(nodelist: str) -> list[str]:
    """Expand a Slurm node list (`n[1-3]`) the way Slurm does."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return out.split()


def _int(environ: Mapping[str, str], name: str) -> int:
    try:
        return int(environ[name])
    except ValueError as e:
        raise UsageError(f"{name}: must be an integer, got {environ[name]!r}") from e


def _tasks_per_node(value: str) -> int:
    """SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE look like `2` or `2(x3)` or `2(x2),1`."""
    return int(value.split("(")[0].split(",")[0])


def resolve(environ: Mapping[str, str] | None = None, nproc_per_node: int | None = None,
            hostnames: Callable[[str], list[str]] = scontrol_hostnames,
            local_rank: int = 0) -> DistEnv:
    """Who this process is, from its environment (see the module's docstring)."""
    env = os.environ if environ is None else environ
    if all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        check_rank(rank, world)
        source = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        return DistEnv(rank, _int(env, "LOCAL_RANK"), world,
                       int(env.get("LOCAL_WORLD_SIZE", world)), int(env.get("GROUP_RANK", 0)),
                       env.get("MASTER_ADDR", "127.0.0.1"),
                       int(env.get("MASTER_PORT", DEFAULT_PORT)), source)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
        check_rank(rank, world)
        per_node = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "1"
        port = int(env["MASTER_PORT"]) if "MASTER_PORT" in env else \
            20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000  # same on every task of a job
        master = env.get("MASTER_ADDR") or hostnames(env["SLURM_NODELIST"])[0]
        return DistEnv(rank, int(env.get("SLURM_LOCALID", 0)), world, _tasks_per_node(per_node),
                       int(env.get("SLURM_NODEID", 0)), master, port, "slurm")
    if all(k in env for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")):
        node, nodes = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        check_rank(node, nodes)
        per_node = nproc_per_node or 1
        check_rank(local_rank, per_node)
        return DistEnv(node * per_node + local_rank, local_rank, nodes * per_node, per_node, node,
                       env["MASTER_ADDR"], _int(env, "MASTER_PORT"), "platform")
    return DistEnv(0, 0, 1, 1, 0, "127.0.0.1", DEFAULT_PORT, "single")


def from_tcp(init_method: str, rank: int, world_size: int, local_rank: int = 0) -> DistEnv:
    """`tcp://HOST:PORT` with an explicit rank and world size (seed 004's mmmg_*.py).
    One rank per machine has local rank 0; K ranks started on one host by benchlib's
    tcp launcher pass their rank as the local rank, so each gets its own GPU."""
    parts = urlparse(init_method)
    try:
        port = parts.port
    except ValueError:  # urlparse refuses a port past 65535 with a bare ValueError
        port = None
    if parts.scheme != "tcp" or not parts.hostname or port is None:
        raise UsageError(f"init_method: expected tcp://HOST:PORT with PORT in 1024-65535, "
                         f"got {init_method!r}")
    check_port(port)
    check_rank(rank, world_size)
    return DistEnv(rank, local_rank, world_size, 1, rank, parts.hostname, port, "tcp")


def in_allocation() -> bool:
    return "SLURM_JOB_ID" in os.environ


def job_nodes() -> int:
    """How many nodes this Slurm job holds (1 outside a job)."""
    return int(os.environ.get("SLURM_JOB_NUM_NODES", os.environ.get("SLURM_NNODES", "1")))


def require_allocation(nnodes: int) -> None:
    """`launcher: srun` runs inside a job; the job must have the nodes the row asks for."""
    if not in_allocation():
        raise UsageError("launcher: srun needs a Slurm allocation (run the sweep with "
                         "--executor slurm, or inside sbatch/salloc); locally use torchrun "
                         "or lightning")
    have = job_nodes()
    if nnodes > have:
        raise UsageError(f"nnodes: {nnodes} asked for, but this job has {have} node(s); "
                         f"submit with --nodes={nnodes}")


def first_host() -> str:
    """The first host of this Slurm job's allocation."""
    return scontrol_hostnames(os.environ["SLURM_JOB_NODELIST"])[0]
