"""`python -m benchlib.workers.doctor`: seed 004's two-rank toy test, made useful.

Joins the group, all-reduces a tensor whose right sum is known (rank r sends r + 1; the
sum is n(n+1)/2), gathers every rank's host, and times small all-reduces (latency).
Run it through torchrun, or on each machine with --init-method tcp://HOST:PORT --rank R
--world-size N (as seed 004 did).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

import torch
import torch.distributed as dist

from benchlib.distributed.env import DistEnv
from benchlib.errors import RankError
from benchlib.workers.bootstrap import entry


def check(args: argparse.Namespace, env: DistEnv, device: torch.device, backend: str) -> dict:
    n = env.world_size
    joined = dist.is_initialized()  # alone too, with --group-of-one
    value = torch.full((4,), float(env.rank + 1), device=device)
    if joined:
        dist.all_reduce(value)
    expected = n * (n + 1) / 2
    ok = bool(torch.all(value == expected))
    hosts: list = [None] * n
    if joined:
        dist.all_gather_object(hosts, socket.gethostname())
    else:
        hosts = [socket.gethostname()]
    small = torch.zeros(1, device=device)
    latencies = []
    for _ in range(args.iters if joined else 0):
        start = time.perf_counter()
        dist.all_reduce(small)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        latencies.append(time.perf_counter() - start)
    latency = statistics.median(latencies) if latencies else None
    line = (f"doctor: {'OK' if ok else 'WRONG SUM'} world_size={n} backend={backend} "
            f"all_reduce sum={float(value[0])} expected={expected} hosts={','.join(hosts)} "
            f"latency_us={latency * 1e6:.1f}" if latency else
            f"doctor: {'OK' if ok else 'WRONG SUM'} world_size=1, no process group (nothing to reduce)")
    print(line, flush=True)
    if not ok:
        raise RankError(f"all_reduce gave {float(value[0])}, expected {expected}")
    return {"metrics": {"ok": ok, "world_size": n, "backend_used": backend, "latency_s": latency},
            "details": {"hosts": hosts, "line": line}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchlib.workers.doctor", description=__doc__)
    p.add_argument("--iters", type=int, default=50)
    return p


if __name__ == "__main__":
    raise SystemExit(entry(check, parser()))
