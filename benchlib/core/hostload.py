"""How busy the host was around a run: the load average and the cores, sampled when the
run starts and when it ends. A run started while the 1-minute load exceeded the cores
shared them with something else, and its figures say more about that than about the
configuration (a run measured 681 samples/s against 16,834 alone): its record says so
(`host_load.busy`) and the report flags it."""

from __future__ import annotations

import os
from typing import Any


def sample() -> dict[str, Any]:
    """The load averages (1, 5, 15 min; None where the OS has none) and the CPU count."""
    try:
        one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    except (AttributeError, OSError):
        one = five = fifteen = None
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "cpus": os.cpu_count()}


def span(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """A record's `host_load`: both samples and whether the run started on a busy host."""
    return {"start": start, "end": end, "busy": busy(start)}


def busy(start: dict[str, Any]) -> bool:
    load, cpus = start.get("load_1m"), start.get("cpus")
    return load is not None and bool(cpus) and load > cpus


def describe(host_load: dict[str, Any] | None) -> str:
    """'busy host: load 5.1 on 2 cores at start' for a run started busy, else ''."""
    if not host_load or not host_load.get("busy"):
        return ""
    start = host_load["start"]
    return f"busy host: load {start['load_1m']:g} on {start['cpus']} cores at start"
