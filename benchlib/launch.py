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
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.config import choices
from benchlib.distributed.env import check_port
from benchlib.errors import PREEMPTED_EXIT_CODE, LaunchError, UsageError

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
class Process:
    label: str  # "rank 1", "torchrun agent", ...
    rank: int | None
    popen: subprocess.Popen
    log: Path


@dataclass
class LaunchResult:
    log_dir: Path
    result: dict[str, Any]  # what rank 0 wrote to result.json
    wall_s: float


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the process that launched it dies (a notebook
    kernel shut down by a timeout must not leave ranks holding a GPU)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(argv: list[str], log: Path, label: str, rank: int | None, env: dict | None) -> Process:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True,  # one group: stopped together
                                 preexec_fn=_die_with_parent)
    return Process(label, rank, popen, log)


def _stop(processes: list[Process], grace_s: float = 35.0) -> None:
    """Stop every process group. The grace period covers torchrun, whose agent gives
    its workers (in sessions of their own) up to 30 s before it exits itself."""
    import os

    for p in processes:  # the group even when its leader is gone: mp.spawn's children
        try:               # outlive a killed parent, and nothing else would stop them
            os.killpg(p.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    for p in processes:
        try:
            p.popen.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.popen.wait()


_ROOT_CAUSE = re.compile(r"host\s*:\s*(?P<host>\S+)\s*\n\s*rank\s*:\s*(?P<rank>\d+).*?\n\s*"
                         r"exitcode\s*:\s*(?P<code>-?\d+)", re.S)
_RANK_HOST = re.compile(r"^rank \d+/\d+ \(local \d+\) on (?P<host>\S+),", re.M)
_SPAWNED = re.compile(r"process (?P<rank>\d+) terminated with (?:exit code (?P<code>-?\d+)|"
                      r"signal (?P<signal>\w+)|the following error)", re.I)


def _failed_rank(p: Process, log_dir: Path) -> tuple[int | None, str, int, Path]:
    """Which rank failed, on which host, with which code, and its log: from the launcher's
    own report where one process stands for several ranks (torchrun, mp.spawn)."""
    host, code, rank, log = socket.gethostname(), p.popen.returncode, p.rank, p.log
    text = p.log.read_text(errors="replace") if p.log.exists() else ""
    marks = sorted((m["time"], int(f.stem[4:]), m["host"])
                   for f in log_dir.glob("rank*.failed") if (m := json.loads(f.read_text())))
    # what the launcher reports: torchrun lists every failed rank (its "Root Cause" is
    # merely the first it observed), mp.spawn the first
    reported = [(int(m["rank"]), m["host"], int(m["code"])) for m in _ROOT_CAUSE.finditer(text)]
    if (root := text.find("Root Cause")) >= 0 and (m := _ROOT_CAUSE.search(text, root)):
        reported.insert(0, (int(m["rank"]), m["host"], int(m["code"])))
    if (m := _SPAWNED.search(text)) is not None:
        reported.append((int(m["rank"]), host, int(m["code"]) if m["code"] else
                         -signal.Signals[m["signal"]]
                         if m["signal"] in signal.Signals.__members__ else code))
    # A rank killed by a signal (OOM killer, a lost node) writes no mark, but the ranks it
    # leaves behind then fail in a collective and do: it is the cause, not them.
    killed = next((r for r in reported if r[2] < 0), None)
    if rank is not None and code is not None and code < 0:
        pass
    elif killed is not None:
        rank, host, code = killed
    elif marks:  # the rank that failed first (the others may have failed because of it)
        _, rank, host = marks[0]
        code = 1
    elif reported:
        rank, host, code = reported[0]
    if rank is not None and (log_dir / f"rank{rank}.log").exists():
        log = log_dir / f"rank{rank}.log"
        # the rank's own first line names its host (torchrun --standalone says "localhost")
        if (m := _RANK_HOST.search(log.read_text(errors="replace"))) is not None:
            host = m["host"]
    return rank, host, code, log


def _rendezvous_timed_out(p: Process) -> str | None:
    """torchrun's agent gave up waiting for the other nodes: say which were missing."""
    text = p.log.read_text(errors="replace") if p.log.exists() else ""
    if "RendezvousTimeoutError" not in text:
        return None
    argv = p.popen.args
    nnodes = argv[argv.index("--nnodes") + 1] if "--nnodes" in argv else "?"
    endpoint = argv[argv.index("--rdzv-endpoint") + 1] if "--rdzv-endpoint" in argv else "?"
    return (f"{p.label}: not all {nnodes} nodes joined the rendezvous at {endpoint} within its "
            f"join timeout; start a torchrun agent on every node (or lower nnodes); log: {p.log}")


def _wait_for_listener(p: Process, port: int, log_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if p.popen.poll() is not None:
            supervise([p], log_dir, 0)  # it exited: report it like any failed rank
            return
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    _stop([p])
    raise LaunchError(f"rank 0 did not listen on port {port} within {timeout_s:.0f} s; "
                      f"log: {log_dir / 'rank0.log'}", 0, socket.gethostname(), None,
                      log_dir / "rank0.log")


def supervise(processes: list[Process], log_dir: Path, timeout_s: float) -> None:
    """Wait for all; on the first failure or at the timeout, stop the rest and raise."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [p.popen.poll() for p in processes]
            # one killed by a signal first: the others may have failed because of it
            failed = min((p for p, c in zip(processes, codes) if c not in (None, 0)),
                         key=lambda p: p.popen.returncode >= 0, default=None)
            if failed is not None:
                if failed.popen.returncode < 0:  # killed: the others may be just finishing
                    _let_finish(processes, 2.0)
                _stop(processes)
                if (missing := _rendezvous_timed_out(failed)) is not None:
                    raise LaunchError(missing, None, socket.gethostname(),
                                      failed.popen.returncode, failed.log)
                rank, host, code, log = _failed_rank(failed, log_dir)
                who = f"rank {rank}" if rank is not None else failed.label
                what = f"exited with code {code}"
                if code == PREEMPTED_EXIT_CODE:
                    what = "was preempted (SIGTERM) and wrote a checkpoint: run it again to resume"
                raise LaunchError(f"{who} on {host} {what}; log: {log}", rank, host, code, log)
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                _stop(processes)
                raise LaunchError(f"timed out after {timeout_s:.0f} s; stopped all ranks; "
                                  f"logs: {log_dir}")
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(processes)
        raise


def _let_finish(processes: list[Process], grace_s: float) -> None:
    """Wait up to `grace_s` for the processes to exit by themselves (a rank that crashed
    in teardown must not cost rank 0 the result it is writing)."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.popen.poll() is None for p in processes):
        time.sleep(0.05)


def worker_argv(module: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", f"benchlib.workers.{module}", *args]


def torchrun_argv(module: str, args: list[str], nproc_per_node: int, port: int,
                  nnodes: int = 1, node_rank: int | None = None, rdzv_id: str = "benchlib",
                  rdzv_host: str = "127.0.0.1", max_restarts: int = 0,
                  join_timeout_s: float | None = None,
                  agent_log_dir: Path | None = None) -> list[str]:
    """`torchrun` (as `python -m torch.distributed.run`, so this interpreter's torch runs).
    One node: --standalone. Several: a c10d rendezvous at HOST:PORT, one agent per node;
    the agents wait `join_timeout_s` for every node (torchrun's default: 600 s).
    `agent_log_dir` keeps the agent's own files (its error.json per attempt) with the
    run; without it torchrun leaves a torchelastic_* folder in /tmp per launch."""
    argv = [sys.executable, "-m", "torch.distributed.run"]
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
    """The ranks share this host's cores: OMP_NUM_THREADS = cores // ranks, unless the
    user set it. torchrun alone would set 1, mp.spawn and tcp nothing; oversubscribed
    ranks on a CPU run several times slower, and that is not what a launcher costs."""
    import os

    env = dict(os.environ if env is None else env)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    return env


# What a process started inside a Slurm job or by torchrun inherits and must not see when
# it is launched locally: Lightning and distributed.env.resolve() would take it for their own layout.
_FOREIGN_LAYOUT = ("SLURM*", "TORCHELASTIC_*", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                   "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def local_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if not any(k == f or (f.endswith("*") and k.startswith(f[:-1]))
                       for f in _FOREIGN_LAYOUT)}


def launch(module: str, args: list[str], log_dir: Path, launcher: str = "torchrun",
           nproc: int = 1, port: int | None = None, timeout_s: float = 600.0,
           env: dict[str, str] | None = None, nnodes: int = 1, max_restarts: int = 0,
           join_timeout_s: float | None = None, srun_torchrun: bool = True) -> LaunchResult:
    """Run `benchlib.workers.<module>` with `nproc` ranks per node on `nnodes` nodes the
    `launcher` way; rank 0's result.json is returned. Workers get `--log-dir` and
    `--result` added.

    Locally, several nodes are several torchrun agents (or Lightning node processes) on
    this host; `srun` spreads them over the current Slurm allocation, as `srun torchrun`
    (one agent per node) or, with `srun_torchrun=False`, one task per rank."""
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
        from benchlib import slurm

        slurm.require_allocation(nnodes)
    if port is None:
        port = free_port()
    else:
        require_free_port(port)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    _clear_logs(log_dir)
    for notes in ("retries.log", "teardown.log"):  # an earlier launch's
        (log_dir / notes).unlink(missing_ok=True)
    result_file = log_dir / "result.json"
    common = [*args, "--log-dir", str(log_dir), "--result", str(result_file)]
    env = thread_env(nproc if launcher == "srun" else nproc * nnodes, env)
    if launcher != "srun":
        env = local_env(env)
    how = _How(launcher, nproc, nnodes, max_restarts, join_timeout_s, srun_torchrun)
    start = time.perf_counter()
    teardown = None
    for attempt in (1, 2):
        try:
            _run_once(module, common, log_dir, how, port, timeout_s, env)
            break
        except LaunchError as e:
            killed = e.exit_code is not None and e.exit_code < 0  # by a signal, e.g. SIGABRT
            if killed and _crashed_after_the_result(log_dir, result_file):
                # rank 0 writes its result after a barrier every rank reached with its work
                # done: a rank that aborted after that died in teardown (seen here: gloo's
                # "terminate called without an active exception"); the run is kept
                teardown = str(e)
                with open(log_dir / "teardown.log", "a") as f:
                    f.write(f"{e}; after rank 0 wrote its result: run kept\n")
                break
            if attempt == 2 or nproc * nnodes == 1 or not killed \
                    or not _crashed_while_joining(log_dir):
                raise
            # a rank died inside init_process_group (seen here: gloo/TCPStore aborting,
            # about 1 launch in 15 on a loaded 2-core machine): no step ran, so start again
            with open(log_dir / "retries.log", "a") as f:
                f.write(f"attempt {attempt}: {e}; retried\n")
            port = free_port() if launcher in ("tcp", "lightning") else port
            _clear_logs(log_dir)
    if not result_file.exists():
        raise LaunchError(f"rank 0 wrote no result; logs: {log_dir}", 0, socket.gethostname(), 0,
                          log_dir / "rank0.log")
    result = json.loads(result_file.read_text())
    result["metrics"]["launch_retries"] = attempt - 1
    result["metrics"]["teardown_crash"] = teardown
    return LaunchResult(log_dir, result, time.perf_counter() - start)


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
                *log_dir.glob("launcher*.log"), log_dir / "result.json"]:
        old.unlink(missing_ok=True)


def _crashed_after_the_result(log_dir: Path, result_file: Path) -> bool:
    """Every rank joined and none raised a Python error, and rank 0's result is complete."""
    from benchlib.workers.common import JOINED

    logs = list(log_dir.glob("rank*.log"))
    if any(log_dir.glob("rank*.failed")) or not logs or not result_file.exists():
        return False
    if any(JOINED not in f.read_text(errors="replace") for f in logs):
        return False
    try:
        return "metrics" in json.loads(result_file.read_text())
    except json.JSONDecodeError:
        return False


def _crashed_while_joining(log_dir: Path) -> bool:
    """No rank raised a Python error, and some rank never joined the process group."""
    from benchlib.workers.common import JOINED

    if any(log_dir.glob("rank*.failed")):
        return False
    logs = list(log_dir.glob("rank*.log"))
    return not logs or any(JOINED not in f.read_text(errors="replace") for f in logs)


def _run_once(module: str, common: list[str], log_dir: Path, how: _How, port: int,
              timeout_s: float, env: dict[str, str]) -> None:
    launcher_log = log_dir / "launcher.log"
    nproc, nnodes = how.nproc, how.nnodes
    if how.launcher == "single":
        procs = [_start(worker_argv(module, common), launcher_log, "worker", 0, env)]
    elif how.launcher == "torchrun" and nnodes == 1:
        argv = torchrun_argv(module, common, nproc, port, max_restarts=how.max_restarts,
                             agent_log_dir=log_dir / "torchrun")
        procs = [_start(argv, launcher_log, "torchrun agent", None, env)]
    elif how.launcher == "torchrun":  # one agent per "node", as on a cluster
        rdzv_id = f"benchlib-{log_dir.name}-{port}"
        procs = [_start(torchrun_argv(module, common, nproc, port, nnodes, node, rdzv_id,
                                      max_restarts=how.max_restarts,
                                      join_timeout_s=how.join_timeout_s,
                                      agent_log_dir=log_dir / "torchrun"),
                        log_dir / f"launcher-node{node}.log", f"torchrun agent of node {node}",
                        None, env) for node in range(nnodes)]
    elif how.launcher == "lightning":  # Lightning starts each node's other local ranks
        procs = [_start(worker_argv(module, common), log_dir / f"launcher-node{node}.log",
                        f"Lightning node {node}", None,
                        {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                         "NODE_RANK": str(node)}) for node in range(nnodes)]
    elif how.launcher == "srun":
        from benchlib import slurm

        argv = slurm.srun_argv(module, common, nnodes, nproc, port, how.srun_torchrun,
                               max_restarts=how.max_restarts, join_timeout_s=how.join_timeout_s)
        procs = [_start(argv, launcher_log, "srun", None, env)]
    elif how.launcher == "mp_spawn":
        argv = worker_argv(module, [*common, "--spawn", str(nproc), "--master-port", str(port)])
        procs = [_start(argv, launcher_log, "mp.spawn parent", None, env)]
    else:  # tcp: one process per rank, as seeds 002 and 004 ran them by hand
        def rank(r: int) -> Process:
            return _start(worker_argv(module, [*common, "--init-method", f"tcp://127.0.0.1:{port}",
                                               "--rank", str(r), "--world-size", str(nproc)]),
                          log_dir / f"launcher-rank{r}.log", f"rank {r}", r, env)

        # rank 0 hosts the store: the others start once it listens (a client that
        # finds the port closed has been seen to abort instead of retrying)
        procs = [rank(0)]
        _wait_for_listener(procs[0], port, log_dir, min(timeout_s, 120.0))
        procs += [rank(r) for r in range(1, nproc)]
    supervise(procs, log_dir, timeout_s)
