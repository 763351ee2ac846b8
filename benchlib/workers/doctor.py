"""`python -m benchlib.workers.doctor`: seed 004's two-rank toy test, made useful.

Joins the group, all-reduces a tensor whose right sum is known (rank r sends r + 1; the
sum is n(n+1)/2), gathers every rank's host, and times small all-reduces (latency).
Run it through torchrun, or on each machine with --init-method tcp://HOST:PORT --rank R
--world-size N (as seed 004 did).

With --health every rank also times a square matmul (TFLOP/s) and, on a GPU, pinned
host-to-device copies (GB/s); then an all-reduce between one rank of each pair of hosts
(busbw), or over all ranks of the one host there is. Rank 0 gathers the figures and names
every device and node pair more than 10% below the median (core/health.py). --slow-rank R
makes rank R's matmul --slow-factor times slower on purpose, to test that it is named.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

import torch
import torch.distributed as dist

from benchlib.core import health
from benchlib.distributed.env import DistEnv
from benchlib.errors import ConfigError, RankError
from benchlib.workers.allreduce import bus_factor
from benchlib.workers.bootstrap import entry

ALLREDUCE_BYTES = 4 * 2**20  # the node pairs' all-reduce: a few MiB, bandwidth-bound


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
    result = {"metrics": {"ok": ok, "world_size": n, "backend_used": backend,
                          "latency_s": latency},
              "details": {"hosts": hosts, "line": line}}
    if args.health:
        figures = health_check(args, env, device, hosts)
        result["metrics"].update(figures.pop("metrics"))
        result["details"]["health"] = figures
    return result


def health_check(args: argparse.Namespace, env: DistEnv, device: torch.device,
                 hosts: list[str]) -> dict:
    """Every device's matmul (and copy) figures and every node pair's all-reduce, gathered;
    the outliers named. Every rank returns the same."""
    joined = dist.is_initialized() and env.world_size > 1
    if args.slow_rank is not None and not 0 <= args.slow_rank < env.world_size:
        raise ConfigError("slow_rank", f"{args.slow_rank} is not a rank of this launch "
                          f"(ranks 0-{env.world_size - 1})")
    size, repeats, dtype = health.matmul_shape(device, args.matmul_size, args.matmul_repeats,
                                               args.matmul_dtype)
    slowed = env.rank == args.slow_rank
    if joined:
        dist.barrier()  # every rank's matmul at once, as in training
    mine = {"rank": env.rank, "host": hosts[env.rank], "device": health.device_name(device),
            "tflops": health.matmul_tflops(device, size, repeats, dtype,
                                           args.slow_factor if slowed else 1.0),
            "h2d_gbps": health.h2d_gbps(device), "slowed": slowed}
    devices = [mine] * env.world_size
    if joined:
        dist.all_gather_object(devices, mine)
    pairs, one_host = _node_allreduce(env, device, hosts) if joined else ([], None)
    names = {f"rank {d['rank']} on {d['host']} ({d['device']})": d["tflops"] for d in devices}
    pair_bw = {f"{p['hosts'][0]} and {p['hosts'][1]}": p["busbw_gbps"] for p in pairs}
    found = ([{"kind": "device", "name": o.name, "value": o.value, "median": o.median,
               "below": o.below} for o in health.outliers(names)]
             + [{"kind": "node pair", "name": o.name, "value": o.value, "median": o.median,
                 "below": o.below} for o in health.outliers(pair_bw)])
    lines = [f"doctor: matmul {size}x{size} {dtype} x{repeats}: {name}: {v:.3g} TFLOP/s"
             + (f", h2d {d['h2d_gbps']:.1f} GB/s" if d["h2d_gbps"] else "")
             + (" (slowed on purpose)" if d["slowed"] else "")
             for (name, v), d in zip(names.items(), devices)]
    mib = ALLREDUCE_BYTES // 2**20
    if pairs:
        lines += [f"doctor: all-reduce {mib} MiB between {name} (ranks {p['ranks'][0]}, "
                  f"{p['ranks'][1]}): busbw {bw:.3g} GB/s"
                  for (name, bw), p in zip(pair_bw.items(), pairs)]
    elif one_host:
        lines.append(f"doctor: all-reduce {mib} MiB: one host ({one_host['host']}), no pair of "
                     f"nodes; over its {len(one_host['ranks'])} ranks: busbw "
                     f"{one_host['busbw_gbps']:.3g} GB/s")
    else:
        lines.append("doctor: all-reduce: one rank, nothing to reduce")
    lines += health.outlier_lines(names, pair_bw)
    if env.rank == 0:
        print("\n".join(lines), flush=True)
    tflops = [d["tflops"] for d in devices]
    return {"metrics": {"tflops_median": statistics.median(tflops), "tflops_min": min(tflops),
                        "pair_busbw_gbps_median": statistics.median(pair_bw.values())
                        if pair_bw else None,
                        "host_busbw_gbps": one_host["busbw_gbps"] if one_host else None,
                        "slow_devices": sum(o["kind"] == "device" for o in found),
                        "slow_node_pairs": sum(o["kind"] == "node pair" for o in found)},
            "matmul": {"size": size, "repeats": repeats, "dtype": dtype},
            "slow_rank": args.slow_rank, "slow_factor": args.slow_factor,
            "devices": devices, "pairs": pairs, "one_host": one_host, "outliers": found,
            "lines": lines}


def _node_allreduce(env: DistEnv, device: torch.device,
                    hosts: list[str]) -> tuple[list[dict], dict | None]:
    """For each pair of hosts, an all-reduce between the first rank of each (a subgroup
    every rank creates, in the same order); on one host, over all its ranks instead."""
    by_host: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        by_host.setdefault(host, []).append(rank)
    names = list(by_host)
    if len(names) == 1:
        busbw = _timed_allreduce(None, env.world_size, device)
        return [], {"host": names[0], "ranks": by_host[names[0]], "busbw_gbps": busbw}
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ranks = [by_host[a][0], by_host[b][0]]
            group = dist.new_group(ranks)
            busbw = _timed_allreduce(group, 2, device) if env.rank in ranks else None
            pairs.append({"hosts": [a, b], "ranks": ranks, "busbw_gbps": busbw})
            dist.barrier()
    mine = [p["busbw_gbps"] for p in pairs]
    every: list = [None] * env.world_size
    dist.all_gather_object(every, mine)
    for k, p in enumerate(pairs):  # the pair's first rank timed it
        p["busbw_gbps"] = every[p["ranks"][0]][k]
    return pairs, None


def _timed_allreduce(group, n: int, device: torch.device, iters: int = 5) -> float:
    """busbw (GB/s) of an all-reduce of ALLREDUCE_BYTES in `group` (None: all ranks):
    the median of `iters` after a warm-up, the slowest member's time."""
    tensor = torch.ones(ALLREDUCE_BYTES // 4, dtype=torch.float32, device=device)
    for _ in range(2):
        dist.all_reduce(tensor, group=group)
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
        times.append(elapsed.item())
    return ALLREDUCE_BYTES / statistics.median(times) / 1e9 * bus_factor(n)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchlib.workers.doctor", description=__doc__)
    p.add_argument("--iters", type=int, default=50)
    health.add_flags(p)
    return p


if __name__ == "__main__":
    raise SystemExit(entry(check, parser(), check=health.check_flags))
