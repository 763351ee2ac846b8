#!/usr/bin/env python3
"""What the communication timer costs (issue 38 item 7): DDP with benchlib's comm hook
(benchlib.distributed.comm_timer, as the trainer attaches it) against DDP's own C++
all-reduce, on 2 gloo ranks of this CPU, as an interleaved A/B over fresh launches:

    .venv/bin/python scripts/comm_hook_ab.py [--launches 5] [--model toynet] [--steps 300]
                                             [--device cuda]

On CUDA (NCCL where there are 2 GPUs, else gloo over one GPU's tensors) the hook reads
CUDA events without a synchronize a step, and the step's clock synchronizes at its end.

Each launch starts 2 ranks (mp.spawn, tcp://) that build the same model twice, one DDP
wrapper left as it is and one with the hook, and train them in turn, step by step (A B,
then B A, ...): drift in a loaded machine then hits both sides alike, pair by pair. A
launch's value per side is its median step (rank 0's wall clock, after a warm-up), and
its paired ratio the median of each pair's hooked step over its plain one. Over the
launches, both with their 95% bootstrap interval over launches
(benchlib.core.stats.ratio_interval) and the one verdict rule at a 2% threshold, the cost
above which timing would become opt-in: the ratio of the two sides' medians (launches
unpaired), and the median paired ratio (each launch one value, against 1)."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchlib.core import hostload
from benchlib.core.models import build_model
from benchlib.core.stats import direction_verdict, ratio_interval
from benchlib.distributed import comm_timer

THRESHOLD = 0.02


def _rank(rank: int, args: argparse.Namespace, port: int, out) -> None:
    torch.set_num_threads(1)
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    backend = "nccl" if cuda and torch.cuda.device_count() > 1 else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    from torch.nn.parallel import DistributedDataParallel as DDP

    shape = tuple(int(n) for n in args.input_shape.split("x"))
    models, timers = [], []
    for hooked in (False, True):
        torch.manual_seed(0)
        model = DDP(build_model(args.model, shape, 20, 48, num_classes=10).to(device),
                    device_ids=[device.index] if cuda else None)
        timers.append(comm_timer.attach(model) if hooked else None)
        models.append((model, torch.optim.SGD(model.parameters(), lr=1e-3)))
    x = torch.rand(args.batch_size, *shape, device=device)
    y = torch.randint(0, 10, (args.batch_size,), device=device)
    steps: list[list[float]] = [[], []]
    for i in range(args.warmup + args.steps):
        for side in (0, 1) if i % 2 == 0 else (1, 0):  # neither side always first
            model, opt = models[side]
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if timers[side] is not None:
                timers[side].step_end()  # as the trainer's step hook does
            if cuda:
                torch.cuda.synchronize(device)
            if i >= args.warmup:
                steps[side].append(time.perf_counter() - start)
    if rank == 0:
        out.put((statistics.median(steps[0]), statistics.median(steps[1]),
                 statistics.median(b / a for a, b in zip(*steps))))
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launches", type=int, default=5, help="launches (5+ for a verdict)")
    p.add_argument("--model", default="toynet")
    p.add_argument("--input-shape", default="1x28x28")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=300, help="timed steps a side a launch")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args()
    plain, hooked, pairs = [], [], []
    print(f"load before: {os.getloadavg()[0]:.2f} on the job's {hostload.job_cores()} cores")
    ctx = mp.get_context("spawn")
    for i in range(args.launches):
        out = ctx.SimpleQueue()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(_rank, args=(args, port, out), nprocs=2, start_method="spawn")
        a, b, paired = out.get()
        plain.append(a)
        hooked.append(b)
        pairs.append(paired)
        print(f"launch {i + 1}: median step without the hook {a * 1e3:.3f} ms, with "
              f"{b * 1e3:.3f} ms; paired ratio with/without {paired:.3f}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    # as speeds (steps a second): with/without > 1 would be faster with the hook
    for name, base, new in (("steps/s with/without the hook, medians", plain, hooked),
                            ("paired, with/without", [1.0] * len(pairs), pairs)):
        r = ratio_interval([[1 / v] for v in base], [[1 / v] for v in new])
        said = direction_verdict(r.low, r.high, THRESHOLD, len(new))
        interval = f"95% CI {r.low:.3f}-{r.high:.3f}" if r.low is not None else \
            f"range {r.range_low:.3f}-{r.range_high:.3f}"
        print(f"{name}: {r.ratio:.3f} ({interval}, n={len(new)} launches); verdict at a "
              f"{THRESHOLD:.0%} threshold: {said}")


if __name__ == "__main__":
    main()
