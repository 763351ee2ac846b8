"""Where a Lightning process sits, worked out before Lightning starts and in the same
order of preference as Lightning's own cluster environments (TorchElastic, then Slurm,
then Lightning's launcher), so that its log is right from the first line and a layout
that would hang (Slurm tasks per node != devices, say) is refused with what to change.
Pure: plain dicts in (tests pass their own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from benchlib.errors import UsageError


@dataclass(frozen=True)
class Layout:
    """Where this process sits, as the cluster environment Lightning picks will see it."""

    environment: str  # TorchElasticEnvironment, SLURMEnvironment or LightningEnvironment
    rank: int
    local_rank: int
    node_rank: int
    devices: int  # processes per node
    nnodes: int

    @property
    def world_size(self) -> int:
        return self.devices * self.nnodes


def read_int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    if name not in environ:
        if default is None:
            raise UsageError(f"{name}: not set by the launcher")
        return default
    try:
        return int(environ[name].split("(")[0])  # SLURM_TASKS_PER_NODE looks like 2(x3)
    except ValueError as e:
        raise UsageError(f"{name}: expected an integer, got {environ[name]!r}") from e


def environment_name(environ: Mapping[str, str]) -> str:
    """The cluster environment Lightning will choose, in its own order of preference
    (torchrun first, as it can run inside Slurm; Slurm unless the job is named bash or
    interactive, Lightning's way to opt out)."""
    if "TORCHELASTIC_RUN_ID" in environ:
        return "TorchElasticEnvironment"
    if "SLURM_NTASKS" in environ and environ.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        return "SLURMEnvironment"
    return "LightningEnvironment"


def global_rank(environ: Mapping[str, str], devices: int | None) -> int:
    """This process's global rank, before any check (to know which log to write)."""
    name = environment_name(environ)
    if name == "TorchElasticEnvironment":
        return read_int(environ, "RANK", 0)
    if name == "SLURMEnvironment":
        return read_int(environ, "SLURM_PROCID", 0)
    node = read_int(environ, "NODE_RANK", read_int(environ, "GROUP_RANK", 0))
    return node * (devices or 1) + read_int(environ, "LOCAL_RANK", 0)


def layout(environ: Mapping[str, str], devices: int | None, nnodes: int | None) -> Layout:
    """Check the launcher's layout against --devices and --nnodes (None: take the
    launcher's) and say where this process sits. Raises UsageError on a mismatch."""
    name = environment_name(environ)
    if name == "TorchElasticEnvironment":
        return _torchelastic_layout(environ, devices, nnodes)
    if name == "SLURMEnvironment":
        return _slurm_layout(environ, devices, nnodes)
    return _lightning_layout(environ, devices, nnodes)


def _torchelastic_layout(environ: Mapping[str, str], devices: int | None,
                         nnodes: int | None) -> Layout:
    """Under torchrun: its world and per-node sizes must be --devices and --nnodes."""
    name = "TorchElasticEnvironment"
    world, per_node = read_int(environ, "WORLD_SIZE"), read_int(environ, "LOCAL_WORLD_SIZE")
    devices, nnodes = devices or per_node, nnodes or world // per_node
    if devices != per_node:
        raise UsageError(f"devices: {devices} per node, but torchrun started {per_node} "
                         f"(--nproc-per-node {per_node}); pass --devices {per_node} or "
                         f"run torchrun --nproc-per-node {devices}")
    if devices * nnodes != world:
        raise UsageError(f"nnodes: {nnodes} nodes x {devices} devices is {devices * nnodes} "
                         f"ranks, but torchrun's world size is {world}; pass --nnodes "
                         f"{world // per_node} or run torchrun --nnodes {nnodes}")
    return Layout(name, read_int(environ, "RANK"), read_int(environ, "LOCAL_RANK"),
                  read_int(environ, "GROUP_RANK", 0), devices, nnodes)


def _slurm_layout(environ: Mapping[str, str], devices: int | None,
                  nnodes: int | None) -> Layout:
    """Under srun: one task per device, on as many nodes as --nnodes."""
    name = "SLURMEnvironment"
    if "SLURM_PROCID" not in environ:
        raise UsageError("SLURM_PROCID: not set: inside a Slurm job, start the ranks with "
                         "srun --ntasks-per-node=<devices> python -m benchlib.workers.lightning ...")
    ntasks = read_int(environ, "SLURM_NTASKS")
    if ntasks > 1 and "SLURM_NTASKS_PER_NODE" not in environ:
        raise UsageError(f"ntasks-per-node: Slurm runs {ntasks} tasks without "
                         "--ntasks-per-node, which Lightning needs (one task per device): "
                         f"srun --ntasks-per-node={devices or '<devices>'}")
    per_node = read_int(environ, "SLURM_NTASKS_PER_NODE", 1)
    nodes = read_int(environ, "SLURM_NNODES",
                     read_int(environ, "SLURM_JOB_NUM_NODES", ntasks // per_node))
    devices, nnodes = devices or per_node, nnodes or nodes
    if devices != per_node:
        raise UsageError(f"devices: {devices} per node, but Slurm runs {per_node} task(s) per "
                         f"node (--ntasks-per-node={per_node}); Lightning needs one task per "
                         f"device: pass --devices {per_node} or srun "
                         f"--ntasks-per-node={devices}")
    if nnodes != nodes:
        raise UsageError(f"nnodes: {nnodes}, but the Slurm job step has {nodes} node(s) "
                         f"(--nodes={nodes}); pass --nnodes {nodes} or srun --nodes={nnodes}")
    if ntasks != devices * nnodes:
        raise UsageError(f"ntasks: Slurm runs {ntasks} tasks, but {nnodes} node(s) x {devices} "
                         f"devices need {devices * nnodes}; srun --nodes={nnodes} "
                         f"--ntasks-per-node={devices}")
    return Layout(name, read_int(environ, "SLURM_PROCID"), read_int(environ, "SLURM_LOCALID", 0),
                  read_int(environ, "SLURM_NODEID", 0), devices, nnodes)


def _lightning_layout(environ: Mapping[str, str], devices: int | None,
                      nnodes: int | None) -> Layout:
    """Lightning's own launcher: this node's rank and the local rank from the environment
    (several nodes need the rendezvous variables set by hand)."""
    name = "LightningEnvironment"
    devices, nnodes = devices or 1, nnodes or 1
    if nnodes > 1:
        for var in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK"):
            if var not in environ and not (var == "NODE_RANK" and "GROUP_RANK" in environ):
                raise UsageError(f"{var}: not set; for {nnodes} nodes without torchrun or srun, "
                                 "start one process per node with MASTER_ADDR (node 0's address), "
                                 f"MASTER_PORT and NODE_RANK (0..{nnodes - 1}) set")
    node = read_int(environ, "NODE_RANK", read_int(environ, "GROUP_RANK", 0))
    local = read_int(environ, "LOCAL_RANK", 0)
    if not 0 <= node < nnodes:
        raise UsageError(f"NODE_RANK: {node} is not in 0..{nnodes - 1} (--nnodes {nnodes})")
    if not 0 <= local < devices:
        raise UsageError(f"LOCAL_RANK: {local} is not in 0..{devices - 1} (--devices {devices})")
    if "LOCAL_RANK" in environ and "WORLD_SIZE" in environ \
            and read_int(environ, "WORLD_SIZE") != devices * nnodes:
        raise UsageError(f"WORLD_SIZE: {environ['WORLD_SIZE']}, but {nnodes} node(s) x {devices} "
                         f"devices is {devices * nnodes}; pass the --devices and --nnodes the "
                         "processes were started for")
    return Layout(name, node * devices + local, local, node, devices, nnodes)
