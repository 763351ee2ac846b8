"""How busy the host was around a run: the load average, the tasks running besides the
run, and the cores, sampled when the run starts and when it ends. A run started while
the 1-minute load exceeded the cores, or while other tasks already filled every core,
shared them with something else, and its figures say more about that than about the
configuration (a run measured 681 samples/s against 16,834 alone): its record says so
(`host_load.busy`) and the report flags it.

The load average alone misses a busy loop started just before the run: it is an average
over the last minute, and two processes spinning on 2 cores approach a load of 2 without
ever exceeding it. The tasks running now (Linux's /proc/loadavg) see them at once.

Both are host-wide and taken at the edges: a sweep's previous row still winding down reads
as load, a job confined to 4 of 64 cores is judged against 64. `Contention` measures what a
run shares during its own timed window: the tasks runnable on the cores the job may use
(its affinity, and a cgroup's CPU quota), the run's own processes left out (every process a
launch started carries its `LAUNCH_VAR`), sampled in the background."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READS = 3  # reads of the running tasks, READ_GAP_S apart: their median, so that one
READ_GAP_S = 0.01  # process passing through the run queue does not count


def sample() -> dict[str, Any]:
    """The load averages (1, 5, 15 min; None where the OS has none), the tasks running now
    besides this one (None off Linux) and the CPU count."""
    try:
        one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    except (AttributeError, OSError):
        one = five = fifteen = None
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "running": running(),
            "cpus": job_cores()}


def job_cores() -> int:
    """The cores this process may run on: its CPU affinity (a Slurm cpuset, taskset), less
    where a cgroup's CPU quota (cgroup v2's cpu.max) allows fewer; os.cpu_count() where the
    OS says neither."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, round(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def running() -> int | None:
    """Tasks runnable on the host now, less the one reading: /proc/loadavg's fourth field
    ('4/121': 4 runnable of 121), the median of READS reads."""
    reads = []
    for i in range(READS):
        if i:
            time.sleep(READ_GAP_S)
        try:
            reads.append(int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
    return statistics.median_low(reads)


def span(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """A record's `host_load`: both samples and whether the run started on a busy host."""
    return {"start": start, "end": end, "busy": busy(start)}


def busy(start: dict[str, Any]) -> bool:
    """The 1-minute load above the cores, or other tasks running on every core."""
    load, others, cpus = start.get("load_1m"), start.get("running"), start.get("cpus")
    if not cpus:
        return False
    return (load is not None and load > cpus) or (others is not None and others >= cpus)


def describe(host_load: dict[str, Any] | None) -> str:
    """'busy host: load 5.1 on 2 cores at start, 2 other tasks running' for a run started
    busy, else ''."""
    if not host_load or not host_load.get("busy"):
        return ""
    start = host_load["start"]
    return f"busy host: {figures(start)} at start"


def figures(start: dict[str, Any]) -> str:
    """'load 5.1 on 2 cores, 2 other tasks running' (the second part where measured)."""
    load, others = start.get("load_1m"), start.get("running")
    return (f"load {'?' if load is None else f'{load:g}'} on {start.get('cpus')} cores"
            + (f", {others} other task{'s' if others != 1 else ''} running"
               if others is not None else ""))


# ---------------------------------------------------------------- during the run

LAUNCH_VAR = "BENCHLIB_LAUNCH"  # set by benchlib.launch for every process of one launch
MIN_INTERVAL_S = 0.5
SCAN_SHARE = 0.02  # the sampler sleeps so that its scans take at most this share of a core
CONTENDED = 0.5  # other runnable tasks a core, on average over the window: contended
BORDERLINE = 0.25  # from here to CONTENDED: borderline


def _task_states(cores: set[int]):
    """(pid, state) of every thread last run on one of `cores` (/proc/PID/task/TID/stat:
    its state, and the CPU it last ran on, field 39)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            tasks = os.listdir(f"/proc/{entry.name}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                fd = os.open(f"/proc/{entry.name}/task/{task}/stat", os.O_RDONLY)
                try:
                    after = os.read(fd, 4096).rpartition(b")")[2].split()
                finally:
                    os.close(fd)
            except OSError:
                continue
            if len(after) > 36 and int(after[36]) in cores:
                yield int(entry.name), after[0].decode()


def _parent(pid: int) -> int | None:
    """The parent of `pid` (/proc/PID/stat's fourth field), None when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Contention(threading.Thread):
    """Tasks runnable on the job's cores besides the run's own, sampled while `timed()`
    says the timed window is open (an EnergyMeter's `in_timed`), every MIN_INTERVAL_S or
    less often where a scan of /proc is slow (a node with thousands of threads)."""

    def __init__(self, timed: Callable[[], bool]):
        super().__init__(daemon=True)
        self.timed = timed
        self.cores = self._cores()
        self.cores_n = job_cores()
        self.mine = os.environ.get(LAUNCH_VAR)
        self.own: dict[int, bool] = {os.getpid(): True}
        self.samples: list[int] = []
        self._stop_event = threading.Event()

    @staticmethod
    def _cores() -> set[int]:
        try:
            return set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return set(range(os.cpu_count() or 1))

    def _is_own(self, pid: int) -> bool:
        """A process of this run: this one, or one whose environment carries this launch's
        LAUNCH_VAR (its ranks, agents, DataLoader workers); without one, this session's."""
        if pid not in self.own:
            try:
                if self.mine:
                    environ = Path(f"/proc/{pid}/environ").read_bytes()
                    if not environ:  # in the middle of its exec (or a kernel thread): its
                        parent = _parent(pid)  # parent decides, and it is asked again later
                        return parent not in (None, 0, pid) and self._is_own(parent)
                    mark = f"{LAUNCH_VAR}={self.mine}".encode()
                    self.own[pid] = mark in environ.split(b"\0")
                else:
                    self.own[pid] = os.getsid(pid) == os.getsid(0)
            except OSError:  # another user's, or gone: not ours
                self.own[pid] = False
        return self.own[pid]

    def sample(self) -> int:
        """Other tasks runnable on the job's cores now."""
        return sum(1 for pid, state in _task_states(self.cores)
                   if state == "R" and not self._is_own(pid))

    def run(self) -> None:
        wait = MIN_INTERVAL_S
        while not self._stop_event.wait(wait):
            if not self.timed():
                continue
            start = time.perf_counter()
            self.samples.append(self.sample())
            wait = max(MIN_INTERVAL_S, (time.perf_counter() - start) / SCAN_SHARE)

    def stop(self) -> dict[str, Any]:
        """The record's figures: other runnable tasks on the job's cores over the timed
        window (mean, p90, samples), the cores, and how contended that is."""
        self._stop_event.set()
        self.join()
        if not self.samples:
            return {"host_others_running": None, "host_cores": self.cores_n,
                    "host_contention_samples": 0}
        ordered = sorted(self.samples)
        mean = sum(ordered) / len(ordered)
        return {"host_others_running": mean,
                "host_others_running_p90": ordered[int(0.9 * (len(ordered) - 1))],
                "host_cores": self.cores_n, "host_contention_samples": len(ordered),
                "host_contention": state(mean, self.cores_n)}


def state(others: float | None, cores: int) -> str | None:
    """`contended` (other runnable tasks CONTENDED a core or more), `borderline` (from
    BORDERLINE), `alone`; None unmeasured."""
    if others is None or not cores:
        return None
    share = others / cores
    return "contended" if share >= CONTENDED else "borderline" if share >= BORDERLINE \
        else "alone"
