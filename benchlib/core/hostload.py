"""How busy the host was around a run: the load average, the tasks running besides the
run, and the cores, sampled when the run starts and when it ends. A run started while
the 1-minute load exceeded the cores, or while other tasks already filled every core,
shared them with something else, and its figures say more about that than about the
configuration (a run measured 681 samples/s against 16,834 alone): its record says so
(`host_load.busy`) and the report flags it.

The load average alone misses a busy loop started just before the run: it is an average
over the last minute, and two processes spinning on 2 cores approach a load of 2 without
ever exceeding it. The tasks running now (Linux's /proc/loadavg) see them at once."""

from __future__ import annotations

import os
import statistics
import time
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
            "cpus": os.cpu_count()}


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
