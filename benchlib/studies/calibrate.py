"""Benchmarks of the measuring machinery itself (`python -m benchlib calibrate`).

1. Loop overhead: benchlib's train loop against a bare hand-written loop, same model,
   same batch, same process, interleaved in rounds (the order alternates, so drift in
   the machine's speed falls on both). The ratio of their throughputs should be >= 0.98.
2. Event clock against wall clock: the figure benchlib reports (per-step CUDA events,
   read after one synchronize) against a synchronized wall clock around the same
   steps. Should agree within 2%. On CPU both are the host clock.
3. Fetch ceilings: `preload_batched` shuffled traverse against a contiguous copy of the
   same decoded array into a preallocated buffer (memory bandwidth, the limit no loader
   can beat) and a shuffled gather of batch-sized row sets into a preallocated batch.
4. Ground truth (`--ground-truth`): benchlib.studies.ground_truth.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from benchlib.core import allocator, loops
from benchlib.core.models import build_model
from benchlib.core.stats import spread_text, summarize
from benchlib.core.timing import StepClock
from benchlib.data import storage
from benchlib.errors import UsageError
from benchlib.studies import calibrate_lm


def _rounds(values, name: str) -> dict[str, float]:
    """Rounds taken inside this one process share its luck: median, p10/p90, range and
    n, and no 95% interval (benchlib.core.stats.summarize)."""
    return summarize(values, name, independent=False)


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


# the input each calibration model takes, and its class count
SHAPES = {"toynet": ((1, 28, 28), 10), "resnet18": ((3, 224, 224), 1000),
          "resnet50": ((3, 224, 224), 1000)}


def _batch(model_name: str, batch_size: int, device: torch.device, model_args=None):
    if model_name == "lm":  # benchlib's GPT at the shape measured against nanoGPT
        return calibrate_lm.build(batch_size, device, model_args)
    if model_name not in SHAPES:
        raise UsageError(f"model: {model_name!r} is not one of {', '.join(SHAPES)}, lm")
    shape, classes = SHAPES[model_name]
    model = build_model(model_name, shape).to(device)
    x = torch.rand(batch_size, *shape, device=device)
    y = torch.randint(0, classes, (batch_size,), device=device)
    return model, x, y


def loop_overhead(device: torch.device, model_name: str = "toynet", batch_size: int = 64,
                  steps: int = 50, rounds: int = 80, seed: int = 0,
                  model_args: dict | None = None) -> dict[str, Any]:
    torch.manual_seed(seed)
    model, x, y = _batch(model_name, batch_size, device, model_args)
    stepper = loops.Stepper("train", device, model)
    bare_optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    if model_name == "lm":  # nanoGPT's step: SGD with momentum, flattened cross-entropy
        stepper, bare_optimizer = calibrate_lm.stepper(model, device), calibrate_lm.optimizer(model)
        loss_fn = calibrate_lm.loss_of
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
    # what benchlib's loop adds to each step: the difference of the two step times
    extra_us = [(batch_size / o - batch_size / b) * 1e6 for o, b in zip(ours, bare)]
    return {**_rounds(ratios, "ratio"), **_rounds(bare, "bare_samples_per_s"),
            **_rounds(ours, "benchlib_samples_per_s"), **_rounds(extra_us, "extra_us_per_step"),
            "model": model_name, "batch_size": batch_size, "steps": steps}


def event_vs_wall(device: torch.device, model_name: str = "toynet", batch_size: int = 64,
                  steps: int = 50, rounds: int = 20, seed: int = 0) -> dict[str, Any]:
    """Each round: one `loops.run_epoch` of `steps` steps; the samples/s its per-step
    times give (CUDA events on CUDA) over the samples/s of a synchronized wall clock
    around the same epoch. 1.0 means the reported figure is the wall-clock truth."""
    torch.manual_seed(seed)
    model, x, y = _batch(model_name, batch_size, device)
    stepper = loops.Stepper("train", device, model)
    loops.run_epoch([(x, y)] * steps, stepper, warmup_steps=0)  # warm-up, not counted
    ratios, reported, wall = [], [], []
    for _ in range(rounds):
        times = loops.run_epoch([(x, y)] * steps, stepper, warmup_steps=0)
        step_total = sum(times.data_s) + sum(times.compute_s)
        reported.append(steps * batch_size / step_total)
        wall.append(steps * batch_size / times.epoch_s)
        ratios.append(reported[-1] / wall[-1])
    return {**_rounds(ratios, "event_over_wall"), **_rounds(reported, "reported_samples_per_s"),
            **_rounds(wall, "wall_samples_per_s"), "model": model_name,
            "batch_size": batch_size, "steps": steps,
            "clock": "cuda events" if device.type == "cuda" else "host clock"}


def fetch_ceiling(path: str, dataset: str = "fashion-mnist", batch_size: int = 64,
                  rounds: int = 5) -> dict[str, Any]:
    """`preload_batched` shuffled traverse against two honest limits on the same decoded
    array, all in samples/s, in one process, interleaved per round (the first round is
    warm-up): a contiguous copy into a preallocated buffer (memory bandwidth) and a
    shuffled gather of `batch_size` rows at a time into a preallocated batch."""
    prepared = storage.prepare(dataset, "preload_batched", path)
    images = prepared.dataset.images
    n, cpu = len(images), torch.device("cpu")
    whole, batch = torch.empty_like(images), torch.empty((batch_size, *images.shape[1:]),
                                                          dtype=images.dtype)
    copy_sps, gather_sps, loader_sps = [], [], []
    for r in range(rounds + 1):
        start = time.perf_counter()
        whole.copy_(images)
        copy_s = time.perf_counter() - start
        order = torch.randperm(n, generator=torch.Generator().manual_seed(r))
        start = time.perf_counter()
        for index in order.split(batch_size):
            torch.index_select(images, 0, index, out=batch[:len(index)])
        gather_s = time.perf_counter() - start
        loader = loops.make_loader(prepared.dataset, prepared.collate_fn, batch_size, 0, cpu, r,
                                   lean=True)
        times = loops.run_epoch(loader, loops.Stepper("traverse", cpu), warmup_steps=0)
        if r:  # round 0 warms caches, the allocator and the loader's machinery
            copy_sps.append(n / copy_s)
            gather_sps.append(n / gather_s)
            loader_sps.append(n / times.epoch_s)
    return {**_rounds([lo / c for lo, c in zip(loader_sps, copy_sps)], "share_of_copy"),
            **_rounds([lo / g for lo, g in zip(loader_sps, gather_sps)], "share_of_gather"),
            **_rounds(copy_sps, "copy_samples_per_s"),
            **_rounds(gather_sps, "gather_samples_per_s"),
            **_rounds(loader_sps, "preload_batched_samples_per_s"),
            "bytes_per_sample": images[0].numel() * images.element_size(), "samples": n}


def report_lines(loop: dict[str, Any], fetch: dict[str, Any] | None,
                 clock: dict[str, Any] | None = None) -> list[str]:
    alloc = allocator.current()
    lines = [
        f"allocator: {alloc['name']}" + (f" GLIBC_TUNABLES={alloc['glibc_tunables']}"
                                         if alloc["glibc_tunables"] else "")
        + (f" LD_PRELOAD={alloc['ld_preload']}" if alloc["ld_preload"] else ""),
        f"train loop: benchlib / bare = {loop['ratio']:.3f} (p10 {loop['ratio_p10']:.3f}, "
        f"p90 {loop['ratio_p90']:.3f}, {spread_text(loop, 'ratio')} rounds); bare "
        f"{loop['bare_samples_per_s']:,.0f} samples/s, benchlib "
        f"{loop['benchlib_samples_per_s']:,.0f} samples/s; target >= 0.98: "
        f"{'met' if loop['ratio'] >= 0.98 else 'MISSED'} ({loop['model']}, batch "
        f"{loop['batch_size']}; benchlib adds {loop['extra_us_per_step']:.1f} us per step, "
        f"p10 {loop['extra_us_per_step_p10']:.1f}, p90 {loop['extra_us_per_step_p90']:.1f})",
    ]
    if clock:
        off = abs(clock["event_over_wall"] - 1)
        lines.append(
            f"ground truth: reported ({clock['clock']}) / synchronized wall clock = "
            f"{clock['event_over_wall']:.4f} "
            f"(p10 {clock['event_over_wall_p10']:.4f}, p90 {clock['event_over_wall_p90']:.4f}, "
            f"{clock['event_over_wall_n']} epochs of {clock['steps']} steps); reported "
            f"{clock['reported_samples_per_s']:,.0f} samples/s, wall {clock['wall_samples_per_s']:,.0f}; "
            f"target within 2%: {'met' if off <= 0.02 else 'MISSED'}")
    if fetch:
        fast = f"{fetch['preload_batched_samples_per_s']:,.0f} samples/s"
        lines += [
            f"contiguous copy (memory bandwidth) ceiling: {fetch['copy_samples_per_s']:,.0f} "
            f"samples/s of {fetch['bytes_per_sample']} B each; preload_batched shuffled traverse "
            f"({fast}) reaches {fetch['share_of_copy']:.1%} of it (p10 "
            f"{fetch['share_of_copy_p10']:.1%}, p90 {fetch['share_of_copy_p90']:.1%}, "
            f"{fetch['share_of_copy_n']} rounds); target >= 40%: "
            f"{'met' if fetch['share_of_copy'] >= 0.40 else 'MISSED'}",
            f"shuffled gather (rows by index into a preallocated batch) ceiling: "
            f"{fetch['gather_samples_per_s']:,.0f} samples/s; preload_batched reaches "
            f"{fetch['share_of_gather']:.1%} of it (p10 {fetch['share_of_gather_p10']:.1%}, "
            f"p90 {fetch['share_of_gather_p90']:.1%})"]
    return lines
