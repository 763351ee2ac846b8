"""Start distributed workers as subprocesses and watch them: torchrun (one agent, or one
agent per "node" with a c10d rendezvous), mp.spawn, one process per rank with tcp://
init, Lightning's own launcher (one process per node, Lightning starts the local ranks),
`srun` over the current Slurm allocation, or one plain process.

Notebooks never train in their own kernel: they call `launch()`, which starts
`python -m benchlib.workers.<name>` the chosen way. Every rank writes its merged
stdout/stderr to `<log_dir>/rank<R>.log` (the worker redirects itself once it knows
its rank); whatever the launcher itself prints goes to `<log_dir>/launcher.log`.
When a process fails, the others are stopped at once and `LaunchError` names the rank,
host, exit code and log; a run that outlives its timeout is stopped the same way.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.config import choices
from benchlib.core import hostload, progress
from benchlib.distributed.env import check_port, require_allocation
from benchlib.errors import LaunchError, UsageError
from benchlib.launch import protocol
from benchlib.launch.argv import local_env, srun_argv, thread_env, torchrun_argv, worker_argv
from benchlib.launch.supervise import Process, start, supervise, wait_for_listener

# how processes start: DDP's ways (choices.LAUNCHERS), Lightning's own, Slurm's, or one
# plain process
LAUNCHERS = (*choices.LAUNCHERS, "lightning", "srun", "single")
MULTI_NODE = ("torchrun", "lightning", "srun")  # the launchers that take nnodes > 1


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def require_free_port(port: int, host: str = "127.0.0.1") -> None:
    check_port(port)
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise UsageError(f"port: {port} is in use on {host} ({e.strerror}); "
                             "leave it out to get a free one") from e


@dataclass
class LaunchResult:
    log_dir: Path
    result: dict[str, Any]  # what rank 0 wrote to result.json
    wall_s: float


def launch(module: str, args: list[str] | dict[str, Any], log_dir: Path, launcher: str = "torchrun",
           nproc: int = 1, port: int | None = None, timeout_s: float = 600.0,
           env: dict[str, str] | None = None, nnodes: int = 1, max_restarts: int = 0,
           join_timeout_s: float | None = None, srun_torchrun: bool = True) -> LaunchResult:
    """Run `benchlib.workers.<module>` with `nproc` ranks per node on `nnodes` nodes the
    `launcher` way; rank 0's result.json is returned. `args`: the worker's flags, or its
    parameters ({name: value}) for `<log_dir>/run.json`, which every rank reads (`--config`).
    Workers get `--log-dir` and `--result` added.

    Locally, several nodes are several torchrun agents (or Lightning node processes) on
    this host; `srun` spreads them over the current Slurm allocation, as `srun torchrun`
    (one agent per node) or, with `srun_torchrun=False`, one task per rank."""
    _check_layout(launcher, nproc, nnodes, max_restarts)
    if port is None:
        port = free_port()
    else:
        require_free_port(port)
    log_dir = _fresh_log_dir(Path(log_dir))
    if isinstance(args, dict):  # the parameters as data, beside the logs
        args = ["--config", str(protocol.write_run_config(log_dir, module, args))]
    result_file = log_dir / "result.json"
    common = [*args, "--log-dir", str(log_dir), "--result", str(result_file)]
    env = thread_env(nproc if launcher == "srun" else nproc * nnodes, env)
    env[protocol.PREEMPTED_NOTE] = str(log_dir / protocol.PREEMPTED_NOTE_FILE)
    env[hostload.LAUNCH_VAR] = str(log_dir)  # every process of this launch: the run's own
    if launcher != "srun":
        env = local_env(env)
    how = _How(launcher, nproc, nnodes, max_restarts, join_timeout_s, srun_torchrun)
    start = time.perf_counter()
    teardown = None
    for attempt in (1, 2):
        try:
            with progress.waiting(f"{module}: {nproc * nnodes} rank(s) via {launcher}",
                                  log_dir / "rank0.log"):
                _run_once(module, common, log_dir, how, port, timeout_s, env)
            break
        except LaunchError as e:
            killed = e.exit_code is not None and e.exit_code < 0  # by a signal, e.g. SIGABRT
            if killed and protocol.crashed_after_the_result(log_dir, result_file):
                # rank 0 writes its result after a barrier every rank reached with its work
                # done: a rank that aborted after that died in teardown (seen here: gloo's
                # "terminate called without an active exception"); the run is kept
                teardown = str(e)
                with open(log_dir / "teardown.log", "a") as f:
                    f.write(f"{e}; after rank 0 wrote its result: run kept\n")
                break
            if attempt == 2 or nproc * nnodes == 1 or not killed \
                    or not protocol.crashed_while_joining(log_dir):
                raise
            # a rank died inside init_process_group (seen here: gloo/TCPStore aborting,
            # about 1 launch in 15 on a loaded 2-core machine): no step ran, so start again
            with open(log_dir / "retries.log", "a") as f:
                f.write(f"attempt {attempt}: {e}; retried\n")
            port = free_port() if launcher in ("tcp", "lightning") else port
            _clear_logs(log_dir)
    result = _read_result(log_dir, result_file)
    result["metrics"].update(launch_retries=attempt - 1, teardown_crash=teardown,
                             **protocol.topology(protocol.rank_hosts(log_dir)))
    return LaunchResult(log_dir, result, time.perf_counter() - start)


def _read_result(log_dir: Path, result_file: Path) -> dict[str, Any]:
    if not result_file.exists():
        raise LaunchError(f"rank 0 wrote no result; logs: {log_dir}", 0, socket.gethostname(), 0,
                          log_dir / "rank0.log")
    return json.loads(result_file.read_text())


def _check_layout(launcher: str, nproc: int, nnodes: int, max_restarts: int) -> None:
    """Refuse a launch this launcher cannot do, before anything starts."""
    if launcher not in LAUNCHERS:
        raise UsageError(f"launcher: {launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if nproc < 1:
        raise UsageError(f"nproc: must be >= 1, got {nproc}")
    if nnodes < 1:
        raise UsageError(f"nnodes: must be >= 1, got {nnodes}")
    if nnodes > 1 and launcher not in MULTI_NODE:
        raise UsageError(f"nnodes: {launcher} starts one node; for {nnodes} use one of "
                         f"{', '.join(MULTI_NODE)}")
    if max_restarts and launcher not in ("torchrun", "srun"):
        raise UsageError(f"max_restarts: only torchrun restarts workers, not {launcher}")
    if launcher == "srun":
        require_allocation(nnodes)


def _fresh_log_dir(log_dir: Path) -> Path:
    """`log_dir`, made, without an earlier launch's logs, result and notes."""
    log_dir.mkdir(parents=True, exist_ok=True)
    _clear_logs(log_dir)
    for notes in ("retries.log", "teardown.log"):  # an earlier launch's
        (log_dir / notes).unlink(missing_ok=True)
    return log_dir


@dataclass(frozen=True)
class _How:
    launcher: str
    nproc: int
    nnodes: int
    max_restarts: int
    join_timeout_s: float | None
    srun_torchrun: bool


def _clear_logs(log_dir: Path) -> None:
    """A launch's failure report must not read an earlier run's logs."""
    for old in [*log_dir.glob("rank*.log"), *log_dir.glob("rank*.failed"),
                *log_dir.glob("launcher*.log"), log_dir / "result.json",
                log_dir / protocol.PREEMPTED_NOTE_FILE]:
        old.unlink(missing_ok=True)


def _run_once(module: str, common: list[str], log_dir: Path, how: _How, port: int,
              timeout_s: float, env: dict[str, str]) -> None:
    launcher_log = log_dir / "launcher.log"
    nproc, nnodes = how.nproc, how.nnodes
    if how.launcher == "single":
        procs = [start(worker_argv(module, common), launcher_log, "worker", 0, env)]
    elif how.launcher == "torchrun" and nnodes == 1:
        argv = torchrun_argv(module, common, nproc, port, max_restarts=how.max_restarts,
                             agent_log_dir=log_dir / "torchrun")
        procs = [start(argv, launcher_log, "torchrun agent", None, env)]
    elif how.launcher == "torchrun":  # one agent per "node", as on a cluster
        rdzv_id = f"benchlib-{log_dir.name}-{port}"
        procs = [start(torchrun_argv(module, common, nproc, port, nnodes, node, rdzv_id,
                                     max_restarts=how.max_restarts,
                                     join_timeout_s=how.join_timeout_s,
                                     agent_log_dir=log_dir / "torchrun"),
                       log_dir / f"launcher-node{node}.log", f"torchrun agent of node {node}",
                       None, env) for node in range(nnodes)]
    elif how.launcher == "lightning":  # Lightning starts each node's other local ranks
        procs = [start(worker_argv(module, common), log_dir / f"launcher-node{node}.log",
                       f"Lightning node {node}", None,
                       {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                        "NODE_RANK": str(node)}) for node in range(nnodes)]
    elif how.launcher == "srun":
        argv = srun_argv(module, common, nnodes, nproc, port, how.srun_torchrun,
                         max_restarts=how.max_restarts, join_timeout_s=how.join_timeout_s)
        procs = [start(argv, launcher_log, "srun", None, env)]
    elif how.launcher == "mp_spawn":
        argv = worker_argv(module, [*common, "--spawn", str(nproc), "--master-port", str(port)])
        procs = [start(argv, launcher_log, "mp.spawn parent", None, env)]
    else:  # tcp: one process per rank, as seeds 002 and 004 ran them by hand
        def rank(r: int) -> Process:
            return start(worker_argv(module, [*common, "--init-method", f"tcp://127.0.0.1:{port}",
                                              "--rank", str(r), "--world-size", str(nproc),
                                              "--local-rank", str(r)]),
                         log_dir / f"launcher-rank{r}.log", f"rank {r}", r, env)

        # rank 0 hosts the store: the others start once it listens (a client that
        # finds the port closed has been seen to abort instead of retrying)
        procs = [rank(0)]
        wait_for_listener(procs[0], port, log_dir, min(timeout_s, 120.0))
        procs += [rank(r) for r in range(1, nproc)]
    supervise(procs, log_dir, timeout_s)
