"""`python -m benchlib.workers.allreduce`: all-reduce bandwidth over message sizes.

For each size: warm-up iterations, then timed ones (device synchronized, the slowest
rank's time counts). algbw = bytes / time; busbw = algbw x 2(n-1)/n, the nccl-tests
definition, which makes the figure comparable across rank counts.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist

from benchlib.distributed.env import DistEnv
from benchlib.errors import ConfigError
from benchlib.workers.bootstrap import entry


def bus_factor(world_size: int) -> float:
    return 2 * (world_size - 1) / world_size


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= 4
    return out


def measure(args: argparse.Namespace, env: DistEnv, device: torch.device, backend: str) -> dict:
    if not dist.is_initialized():
        raise ConfigError("world_size", "all-reduce bandwidth needs at least 2 ranks (or one "
                          "with --group-of-one: busbw is then 0, algbw the local copy)")
    rows = []
    for size in sizes(args.min_bytes, args.max_bytes):
        tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        times = []
        for _ in range(args.iters):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64,
                                   device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time counts
            times.append(elapsed.item())
        t = statistics.median(times)
        algbw = size / t / 1e9
        rows.append({"bytes": size, "time_s": t, "algbw_gbps": algbw,
                     "busbw_gbps": algbw * bus_factor(env.world_size)})
        if env.rank == 0:
            print(f"{size:>12} B  {t * 1e6:10.1f} us  algbw {algbw:8.3f} GB/s  "
                  f"busbw {rows[-1]['busbw_gbps']:8.3f} GB/s", flush=True)
    peak = max(rows, key=lambda r: r["busbw_gbps"])
    return {"metrics": {"busbw_gbps": peak["busbw_gbps"], "algbw_gbps": peak["algbw_gbps"],
                        "busbw_at_bytes": peak["bytes"], "world_size": env.world_size,
                        "backend_used": backend, "latency_s": rows[0]["time_s"]},
            "details": {"sizes": rows}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchlib.workers.allreduce", description=__doc__)
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    return p


if __name__ == "__main__":
    raise SystemExit(entry(measure, parser()))
