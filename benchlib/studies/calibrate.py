"""Benchmarks of the measuring machinery itself (`python -m benchlib calibrate`).

1. Loop overhead: benchlib's train loop against a bare hand-written loop, same model,
   same batch, same process, interleaved in rounds (the order alternates, so drift in
   the machine's speed falls on both). The ratio of their throughputs should be >= 0.98.
2. Fetch ceiling: `preload_batched` traverse against a plain copy of the same decoded
   array in the same run; the copy is the limit no loader can beat.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchlib.core import allocator, loops
from benchlib.core.models import build_model
from benchlib.core.timing import StepClock, summarize
from benchlib.data import storage


def _bare_loop(model, optimizer, loss_fn, x, y, steps: int, clock: StepClock) -> float:
    start = clock.now()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return steps * len(y) / (clock.now() - start)


def _benchlib_loop(stepper: loops.Stepper, x, y, steps: int, clock: StepClock) -> float:
    start = clock.now()
    loops.run_epoch([(x, y)] * steps, stepper, warmup_steps=0)
    return steps * len(y) / (clock.now() - start)


def loop_overhead(device: torch.device, model_name: str = "toynet", batch_size: int = 64,
                  steps: int = 50, rounds: int = 80, seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = build_model(model_name).to(device)
    stepper = loops.Stepper("train", device, model)
    bare_optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(batch_size, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)
    clock = StepClock(device)
    _bare_loop(model, bare_optimizer, loss_fn, x, y, steps, clock)  # warm-up, not counted
    _benchlib_loop(stepper, x, y, steps, clock)
    bare, ours = [], []
    for r in range(rounds):
        order = ("bare", "benchlib") if r % 2 == 0 else ("benchlib", "bare")
        for which in order:
            if which == "bare":
                bare.append(_bare_loop(model, bare_optimizer, loss_fn, x, y, steps, clock))
            else:
                ours.append(_benchlib_loop(stepper, x, y, steps, clock))
    ratios = [o / b for o, b in zip(ours, bare)]
    return {**summarize(ratios, "ratio"), **summarize(bare, "bare_samples_per_s"),
            **summarize(ours, "benchlib_samples_per_s")}


def fetch_ceiling(path: str, dataset: str = "fashion-mnist", batch_size: int = 64,
                  rounds: int = 5) -> dict[str, Any]:
    """preload_batched traverse vs a plain copy of the same array, both in samples/s."""
    prepared = storage.prepare(dataset, "preload_batched", path)
    images = prepared.dataset.images
    cpu = torch.device("cpu")
    copy_sps, loader_sps = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        images.clone()
        copy_sps.append(len(images) / (time.perf_counter() - start))
        loader = loops.make_loader(prepared.dataset, prepared.collate_fn, batch_size, 0, cpu, 0)
        times = loops.run_epoch(loader, loops.Stepper("traverse", cpu), warmup_steps=0)
        loader_sps.append(prepared.samples / times.epoch_s)
    share = [lo / c for lo, c in zip(loader_sps, copy_sps)]
    return {**summarize(share, "share_of_copy"), **summarize(copy_sps, "copy_samples_per_s"),
            **summarize(loader_sps, "preload_batched_samples_per_s"),
            "bytes_per_sample": images[0].numel() * images.element_size()}


def report_lines(loop: dict[str, Any], fetch: dict[str, Any] | None) -> list[str]:
    alloc = allocator.current()
    lines = [
        f"allocator: {alloc['name']}" + (f" GLIBC_TUNABLES={alloc['glibc_tunables']}"
                                         if alloc["glibc_tunables"] else "")
        + (f" LD_PRELOAD={alloc['ld_preload']}" if alloc["ld_preload"] else ""),
        f"train loop: benchlib / bare = {loop['ratio']:.3f} (p10 {loop['ratio_p10']:.3f}, "
        f"p90 {loop['ratio_p90']:.3f}, 95% CI {loop['ratio_ci95_low']:.3f}-"
        f"{loop['ratio_ci95_high']:.3f}, {loop['ratio_n']} rounds); bare "
        f"{loop['bare_samples_per_s']:,.0f} samples/s, benchlib "
        f"{loop['benchlib_samples_per_s']:,.0f} samples/s; target >= 0.98: "
        f"{'met' if loop['ratio'] >= 0.98 else 'MISSED'}",
    ]
    if fetch:
        lines.append(
            f"preload_batched traverse: {fetch['preload_batched_samples_per_s']:,.0f} samples/s "
            f"= {fetch['share_of_copy']:.1%} of a plain copy of the same array "
            f"({fetch['copy_samples_per_s']:,.0f} samples/s, {fetch['bytes_per_sample']} B each); "
            f"target >= 20%: {'met' if fetch['share_of_copy'] >= 0.20 else 'MISSED'}")
    return lines
