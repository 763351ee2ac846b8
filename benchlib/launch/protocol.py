"""The rank protocol: what a worker leaves behind for the launcher that watches it, and
how the launcher reads it. Written here and read here, nowhere else:

    <log_dir>/run.json         the worker's parameters as data ({name: value}), written by
                               the study's launch and read by every rank (`--config`)
    <log_dir>/rank<R>.log      the rank's merged stdout/stderr; its first line is the
                               rank banner (`rank R/W (local L) on HOST, ...`)
    JOINED                     printed once the rank is in the process group
    <log_dir>/rank<R>.failed   {time, host, error}: the rank raised (the earliest is blamed)
    <log_dir>/result.json      rank 0's result, written after the last barrier
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import atomic
from benchlib.core.timing import PER_STEP
from benchlib.errors import UsageError

JOINED = "joined the process group"
RUN_CONFIG = "run.json"
# Where a rank that stopped at a checkpoint on SIGTERM says what it saved (the elastic
# trainer): the launcher (<log_dir>/preempted.txt) and the torchrun agent set it, and say
# "checkpoint" after a preemption only when one was written (allreduce keeps none).
PREEMPTED_NOTE = "BENCHLIB_PREEMPTED_NOTE"
PREEMPTED_NOTE_FILE = "preempted.txt"
# how the torchrun agent (benchlib.launch.agent) says that nodes never joined its rendezvous
MISSING_NODES = re.compile(r"^torchrun: (?P<line>not all \S+ nodes joined the rendezvous .*)$",
                           re.M)
_BANNER = re.compile(r"^rank \d+/\d+ \(local \d+\) on (?P<host>\S+),", re.M)


def write_run_config(log_dir: Path, module: str, params: dict[str, Any]) -> Path:
    """The worker's parameters, beside its logs: what the ranks read (`--config`), and
    what a user reruns one rank from by hand."""
    path = Path(log_dir) / RUN_CONFIG
    atomic.write_json(path, {"worker": f"benchlib.workers.{module}", "params": params})
    return path


def read_run_config(path: str) -> dict[str, Any]:
    """The parameters of a run.json; a missing or malformed file is one UsageError."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"config: {path} does not exist") from None
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"config: {path} is not a readable JSON file ({e})") from None
    params = data.get("params") if isinstance(data, dict) else None
    if not isinstance(params, dict):
        raise UsageError(f"config: {path} has no \"params\" object ({{name: value}})")
    return params


def banner(rank: int, world_size: int, local_rank: int, where: str) -> str:
    """The first line of a rank's log: who it is, on which host, started how (`where`)."""
    return f"rank {rank}/{world_size} (local {local_rank}) on {socket.gethostname()}, {where}"


def banner_host(log_text: str) -> str | None:
    """The host a rank's banner names (torchrun --standalone itself says "localhost")."""
    m = _BANNER.search(log_text)
    return m["host"] if m is not None else None


def rank_hosts(log_dir: Path) -> list[str]:
    """The distinct hosts the ranks' banners name, sorted (none for logs without one)."""
    hosts = {banner_host(f.read_text(errors="replace")) for f in Path(log_dir).glob("rank*.log")}
    return sorted(h for h in hosts if h)


def topology(hosts: list[str]) -> dict[str, object]:
    """Where the ranks ran, for a record: `one host` (they talk over loopback, whatever
    the number of "nodes") or `separate hosts` (over the network), the hosts, and how many."""
    kind = "separate hosts" if len(hosts) > 1 else "one host" if hosts else "unknown"
    return {"topology": kind, "rank_hosts": ",".join(hosts), "host_count": len(hosts)}


def redirect_output(log_dir: str | None, rank: int) -> None:
    """This rank's stdout and stderr, merged, into <log_dir>/rank<R>.log."""
    if not log_dir:
        return
    path = Path(log_dir) / f"rank{rank}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def error_line(error: BaseException) -> str:
    """The exception's last line, as a traceback ends: 'ValueError: item 280 is bad' (an
    error a DataLoader worker raised arrives wrapped, its own last line at the end)."""
    name = type(error).__name__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return name
    last = lines[-1]
    return last if re.match(rf"\w*{name}: ", last) else f"{name}: {last}"


def mark_failed(log_dir: str | None, rank: int, error: BaseException) -> None:
    """Leave <log_dir>/rank<R>.failed with the time of the failure and the exception's last
    line: when one rank's failure makes the others fail too, the launcher blames the
    earliest, and names its error."""
    if log_dir:
        atomic.write_json(Path(log_dir) / f"rank{rank}.failed",
                          {"time": time.time(), "host": socket.gethostname(),
                           "error": error_line(error)[:500]})


def failure_error(log_dir: Path, rank: int | None) -> str | None:
    """The error line rank `rank` left in its failure mark, if it left one."""
    mark = Path(log_dir) / f"rank{rank}.failed"
    if rank is None or not mark.exists():
        return None
    return json.loads(mark.read_text()).get("error")


def clear_failed(log_dir: str | None, rank: int) -> None:
    """A restarted rank's: the failure of the attempt before was recovered from."""
    if log_dir:
        (Path(log_dir) / f"rank{rank}.failed").unlink(missing_ok=True)


def failure_marks(log_dir: Path) -> list[tuple[float, int, str]]:
    """(time, rank, host) of every rank that marked itself failed, earliest first."""
    return sorted((m["time"], int(f.stem[4:]), m["host"])
                  for f in log_dir.glob("rank*.failed") if (m := json.loads(f.read_text())))


def write_result(path: str | None, result: dict) -> None:
    """Rank 0's last word: one summary line on its output (the seeds' scripts printed their
    times; a terminal user reads this), then the whole result to `path` for the launcher."""
    print(summary_line(result.get("metrics", {})), flush=True)
    if path:
        atomic.write_json(Path(path), result)


def spread_unit(m: dict) -> str:
    """What the samples/s of a trainer's metrics is a median over: the elastic trainer's
    steps (timing.PER_STEP), the JAX worker's repeats, the other trainers' epochs."""
    if m.get("timing") == PER_STEP:
        return "steps"
    return "repeats" if m.get("framework") == "jax" else "epochs"


def summary_line(m: dict) -> str:
    """`result: 1,234.5 samples/s (p10 1,200.0, p90 1,250.3, 3 epochs), epoch 2.31 s, ...`"""
    if m.get("samples_per_s") is None:  # a benchmark that times no steps says what it did
        return f"result: {m['summary']}" if m.get("summary") else \
            "result: no timed step (see the log above)"
    parts = [f"result: {m['samples_per_s']:,.1f} samples/s"]
    if m.get("samples_per_s_n", 0) > 1:
        parts[0] += (f" (p10 {m['samples_per_s_p10']:,.1f}, p90 {m['samples_per_s_p90']:,.1f}, "
                     f"{m['samples_per_s_n']} {spread_unit(m)})")
    for key, label in (("epoch_s", "epoch"), ("step_s", "step"), ("batch_s", "batch")):
        if m.get(key) is not None:
            parts.append(f"{label} {m[key]:.3g} s")
    if m.get("world_size"):
        parts.append(f"{m['world_size']} rank(s)")
    if m.get("device_name"):
        parts.append(f"on {m['device_name']}")
    if m.get("restarts"):
        parts.append(f"{m['restarts']} restart(s), {m.get('steps_redone', 0)} steps redone")
    return ", ".join(parts)


def crashed_after_the_result(log_dir: Path, result_file: Path) -> bool:
    """Every rank joined and none raised a Python error, and rank 0's result is complete."""
    logs = list(log_dir.glob("rank*.log"))
    if any(log_dir.glob("rank*.failed")) or not logs or not result_file.exists():
        return False
    if any(JOINED not in f.read_text(errors="replace") for f in logs):
        return False
    try:
        return "metrics" in json.loads(result_file.read_text())
    except json.JSONDecodeError:
        return False


def crashed_while_joining(log_dir: Path) -> bool:
    """No rank raised a Python error, and some rank never joined the process group."""
    if any(log_dir.glob("rank*.failed")):
        return False
    logs = list(log_dir.glob("rank*.log"))
    return not logs or any(JOINED not in f.read_text(errors="replace") for f in logs)


def note_checkpoint(text: str) -> None:
    """A rank stopped at a checkpoint on SIGTERM: say what it wrote where its launcher
    (or torchrun agent) looks, if one looks."""
    path = os.environ.get(PREEMPTED_NOTE)
    if path:
        try:
            atomic.write_text(Path(path), text + "\n")
        except OSError:  # e.g. a log folder this node does not share: the exit 75 still says it
            pass


def checkpoint_note(path: str | Path | None) -> str | None:
    """What the preempted ranks said they wrote (None: no checkpoint)."""
    if not path:
        return None
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


def after_preemption(note: str | None) -> tuple[str, str]:
    """(what the ranks did, what to do) after SIGTERM, claiming a checkpoint only when a
    rank said it wrote one."""
    if note:
        return (f"the ranks stopped together and wrote a checkpoint ({note})",
                "run it again to resume")
    return "its ranks stopped without a checkpoint", "run it again"


def missing_nodes(nnodes: str, endpoint: str, join_timeout_s: str) -> str:
    """A torchrun rendezvous that not every node joined, and what to check."""
    return (f"not all {nnodes} nodes joined the rendezvous at {endpoint} within its join "
            f"timeout ({join_timeout_s} s); start a torchrun agent with the same "
            f"--rdzv-endpoint and --rdzv-id on every node (or lower --nnodes), and check "
            f"that {endpoint} is reachable from them")
