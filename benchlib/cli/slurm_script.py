"""`benchlib slurm-script`: the worker's arguments taken apart and checked, and where a
rendered script is kept (each its own file under the outputs folder, never overwritten)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

from benchlib import paths
from benchlib.errors import UsageError

# Worker flags slurm-script sets itself (Lightning), or that torchrun's layout decides
# (ddp, elastic): a value the user gives in --worker-args would fight the script's.
SET_BY_SCRIPT = {"lightning": {"--devices": "devices", "--gpus": "devices", "--nnodes": "nodes"}}
TORCHRUN_LAYOUT = ("--init-method", "--rank", "--world-size", "--spawn", "--local-rank",
                   "--nproc-per-node", "--master-port")


def split_worker_args(text: str) -> list[str]:
    """The --worker-args string as a list, the way a shell would split it."""
    try:
        return shlex.split(text)
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise UsageError(f"worker_args: cannot split {text!r} into arguments "
                         f"({str(e).lower()}); balance its quotes") from None


def _flags(worker_args: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value) for every --flag in the list: `--x 2` and `--x=2` alike."""
    found = []
    for i, arg in enumerate(worker_args):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if not eq:
            nxt = worker_args[i + 1] if i + 1 < len(worker_args) else None
            value = nxt if nxt is not None and not nxt.startswith("--") else None
        found.append((flag, value))
    return found


def check_worker_args(trainer: str, worker_args: list[str], nodes: int, devices: int) -> None:
    """Refuse a worker flag that contradicts the layout the script gives the ranks."""
    given = {"devices": devices, "nodes": nodes}
    for flag, value in _flags(worker_args):
        if trainer in SET_BY_SCRIPT and flag in SET_BY_SCRIPT[trainer]:
            name = SET_BY_SCRIPT[trainer][flag]
            if value != str(given[name]):
                raise UsageError(f"worker_args: {flag} {value} conflicts with --{name} "
                                 f"{given[name]}: the script passes the worker --devices and "
                                 f"--nnodes from slurm-script's --devices and --nodes; give "
                                 f"the count there only")
        elif trainer != "lightning" and flag in TORCHRUN_LAYOUT:
            raise UsageError(f"worker_args: {flag} is set by torchrun's layout in the script "
                             f"(--nodes x --devices ranks); leave it out")


def check_numbers(trainer: str, port: int, max_restarts: int) -> None:
    """What sbatch and torchrun would take and fail on later, inside the job, and a
    restart count nothing would use."""
    from benchlib.distributed.env import check_port

    check_port(port)
    if max_restarts < 0:
        raise UsageError(f"max_restarts: must be >= 0, got {max_restarts}")
    if max_restarts and trainer == "lightning":
        raise UsageError("max_restarts: only torchrun restarts ranks (trainers ddp, elastic); "
                         "lightning runs a task per device under srun, which restarts nothing")


def default_log(outputs: Path) -> str:
    """sbatch --output when none is given: the outputs folder's slurm/, one log per job."""
    return str(outputs / "slurm" / "%x-%j.log")


def keep_script(text: str, trainer: str, outputs: Path) -> Path:
    """Write the script as its own new file, outputs/slurm/benchlib-<trainer>-<time>[-n].sbatch
    (created exclusively: an earlier script is never overwritten)."""
    folder = outputs / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"benchlib-{trainer}-{time.strftime('%Y%m%dT%H%M%S')}"
    for n in range(1000):
        path = folder / (f"{stem}.sbatch" if n == 0 else f"{stem}-{n}.sbatch")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path
    raise UsageError(f"output: {folder} already holds 1000 scripts named {stem}*")


def outputs_for(option: str | None) -> Path:
    """--outputs, else $BENCHLIB_OUTPUTS, else the project's outputs/."""
    return Path(option).resolve() if option else paths.outputs_dir()


def command(args) -> int:
    """`benchlib slurm-script`: print (or submit) an sbatch script for a multi-node run."""
    from benchlib.slurm.commands import submit
    from benchlib.slurm.sbatch import training_script

    worker_args = split_worker_args(args.worker_args)
    check_worker_args(args.trainer, worker_args, args.nodes, args.devices)
    check_numbers(args.trainer, args.port, args.max_restarts)
    outputs = paths.checked_outputs(outputs_for(args.outputs))
    log = args.output or default_log(outputs)
    text = training_script(args.trainer, args.nodes, args.devices, worker_args,
                           log, args.partition, args.time, args.gpu, args.port,
                           args.requeue, check_capacity=not args.no_capacity_check,
                           max_restarts=args.max_restarts, exclusive=not args.share_nodes,
                           ntasks_per_node=args.ntasks_per_node, world_size=args.world_size)
    if not args.submit:
        print(text, end="")
        return 0
    script = keep_script(text, args.trainer, outputs)
    if "%" not in str(Path(log).parent):  # sbatch does not create the log's folder
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    print(f"script: {script}", file=sys.stderr)
    print(submit(script))
    return 0
