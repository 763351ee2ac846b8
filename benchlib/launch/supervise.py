"""Watch the processes of a launch: start each in its own process group (stopped
together, and with their parent), wait for all, and on the first failure or at the
timeout stop the rest and raise a LaunchError that names the failed rank, its host,
its exit code and its log."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib.errors import PREEMPTED_EXIT_CODE, LaunchError, Terminated
from benchlib.launch import protocol


@dataclass
class Process:
    label: str  # "rank 1", "torchrun agent", ...
    rank: int | None
    popen: subprocess.Popen
    log: Path


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the process that launched it dies (a notebook
    kernel shut down by a timeout must not leave ranks holding a GPU)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(argv: list[str], log: Path, label: str, rank: int | None, env: dict | None) -> Process:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True,  # one group: stopped together
                                 preexec_fn=_die_with_parent)
    return Process(label, rank, popen, log)


def stop(processes: list[Process], grace_s: float = 35.0) -> None:
    """Stop every process group. The grace period covers torchrun, whose agent gives
    its workers (in sessions of their own) up to 30 s before it exits itself."""
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




_SPAWNED = re.compile(r"process (?P<rank>\d+) terminated with (?:exit code (?P<code>-?\d+)|"
                      r"signal (?P<signal>\w+)|the following error)", re.I)


def _failed_rank(p: Process, log_dir: Path) -> tuple[int | None, str, int, Path]:
    """Which rank failed, on which host, with which code, and its log: from the launcher's
    own report where one process stands for several ranks (torchrun, mp.spawn)."""
    host, code, rank, log = socket.gethostname(), p.popen.returncode, p.rank, p.log
    text = p.log.read_text(errors="replace") if p.log.exists() else ""
    marks = protocol.failure_marks(log_dir)
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
    # leaves behind then fail in a collective and do: it is the cause, not them. SIGTERM is
    # what torchrun (or we) send the survivors once a rank failed: never the cause.
    killed = next((r for r in reported if r[2] < 0 and r[2] != -signal.SIGTERM), None)
    if rank is not None and code is not None and _killed(code):
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
        host = protocol.banner_host(log.read_text(errors="replace")) or host
    return rank, host, code, log


def _rendezvous_timed_out(p: Process) -> str | None:
    """torchrun's agent gave up waiting for the other nodes: say which were missing (its
    own line, from benchlib.launch.agent; torchrun's traceback from any other)."""
    text = p.log.read_text(errors="replace") if p.log.exists() else ""
    said = protocol.MISSING_NODES.search(text)
    if said:
        return f"{p.label}: {said['line']}; log: {p.log}"
    if "RendezvousTimeoutError" not in text:
        return None
    argv = p.popen.args
    nnodes = argv[argv.index("--nnodes") + 1] if "--nnodes" in argv else "?"
    endpoint = argv[argv.index("--rdzv-endpoint") + 1] if "--rdzv-endpoint" in argv else "?"
    return (f"{p.label}: not all {nnodes} nodes joined the rendezvous at {endpoint} within its "
            f"join timeout; start a torchrun agent on every node (or lower nnodes); log: {p.log}")


def wait_for_listener(p: Process, port: int, log_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if p.popen.poll() is not None:
                supervise([p], log_dir, 0)  # it exited: report it like any failed rank
                return
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
    except (KeyboardInterrupt, Terminated):
        stop([p])
        raise
    stop([p])
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
                         key=lambda p: not _killed(p.popen.returncode), default=None)
            if failed is not None:
                if _killed(failed.popen.returncode):  # the others may be just finishing
                    let_finish(processes, 2.0)
                if (missing := _rendezvous_timed_out(failed)) is not None:
                    # no worker started anywhere: nothing for an agent to save in 30 s
                    stop(processes, grace_s=2.0)
                    raise LaunchError(missing, None, socket.gethostname(),
                                      failed.popen.returncode, failed.log)
                stop(processes)
                rank, host, code, log = _failed_rank(failed, log_dir)
                who = f"rank {rank}" if rank is not None else failed.label
                what = f"exited with code {code}"
                if code in (PREEMPTED_EXIT_CODE, -signal.SIGTERM):
                    # 75: stopped at a step boundary; -15: SIGTERM from outside (we send it
                    # only after a failure) before the process could handle it, e.g. a
                    # torchrun agent still importing torch. Either way a preemption, never
                    # a crash to retry.
                    did, todo = protocol.after_preemption(protocol.checkpoint_note(
                        log_dir / protocol.PREEMPTED_NOTE_FILE))
                    what, code = f"was preempted (SIGTERM); {did}: {todo}", PREEMPTED_EXIT_CODE
                error = protocol.failure_error(log_dir, rank)  # its last exception line
                raise LaunchError(f"{who} on {host} {what}{f': {error}' if error else ''}; "
                                  f"log: {log}", rank, host, code, log)
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                stop(processes)
                raise LaunchError(f"timed out after {timeout_s:.0f} s; stopped all ranks; "
                                  f"logs: {log_dir}")
            time.sleep(0.05)
    except (KeyboardInterrupt, Terminated):  # Ctrl-C, or SIGTERM to the command itself
        stop(processes)
        raise


def _killed(code: int) -> bool:
    """Ended by a signal other than the SIGTERM a launcher sends the survivors of a failure."""
    return code < 0 and code != -signal.SIGTERM


def let_finish(processes: list[Process], grace_s: float) -> None:
    """Wait up to `grace_s` for the processes to exit by themselves (a rank that crashed
    in teardown must not cost rank 0 the result it is writing)."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.popen.poll() is None for p in processes):
        time.sleep(0.05)
