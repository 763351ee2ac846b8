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
4. Ground truth (`--ground-truth`): the real worker path (launch, worker, trainer, warm-up
   left out, slowest rank, median over epochs) on a tiny step that a known delay
   dominates, the delay varying by step, epoch and rank in a known pattern (a slow
   warm-up, a heavy tail, a slow epoch, a slow rank); the figures its result holds, and
   the samples/s the parent's own clock gives over the same timed windows, against the
   pattern's truth (`truth`). Check 2 compares one chain of marks with itself; this one
   has a truth that no clock made, and each case prints what a method blind to it would
   read.
"""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from pathlib import Path
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


# ------------------------------------------------------------------------ ground truth

# The worker's run: SimpleCNN on 8x8 synthetic images (made once on the device: no IO), a
# step of ~2 ms on one idle CPU core (4-16 ms on a loaded 2-core host) that an injected
# delay of 100 ms dominates, so that the base step's drift under load moves the truth
# little. Every step logs a line (the parent's clock reads them); 3 warm-up steps of each
# epoch are left out, as in any run.
GROUND_TRUTH_RUN = {"dataset": "synthetic", "model": "simplecnn", "image_size": 8,
                    "batch_size": 8, "warmup_steps": 3, "epochs": 3, "log_interval": 1}
TOLERANCE = 0.02  # a check passes when the measured samples/s is within 2% of the truth
_STEP_LINE = re.compile(r"step (\d+): loss ")


class LogStamps(threading.Thread):
    """The parent's own clock on a worker: every line rank 0 writes to its log, stamped
    with this process's perf_counter when it lands (polled every `every_s`)."""

    def __init__(self, log: Path, every_s: float = 0.001):
        super().__init__(name="benchlib-log-stamps", daemon=True)
        self.log, self.every_s = log, every_s
        self.lines: list[tuple[float, str]] = []
        self._done = threading.Event()

    def run(self) -> None:
        handle, inode, partial = None, None, ""
        while not self._done.wait(self.every_s):
            try:
                now_inode = os.stat(self.log).st_ino
            except FileNotFoundError:
                continue
            if now_inode != inode:  # made, or made again (a launch retried after a crash)
                if handle is not None:
                    handle.close()
                handle, inode, partial = open(self.log), now_inode, ""
                self.lines.clear()
            chunk = handle.read()
            if chunk:
                at = time.perf_counter()
                *complete, partial = (partial + chunk).split("\n")
                self.lines += [(at, line) for line in complete]
        if handle is not None:
            handle.close()

    def steps(self) -> dict[int, float]:
        """Stop; when the line of each global step (1, 2, ...) landed."""
        self._done.set()
        self.join()
        return {int(m.group(1)): at for at, line in self.lines
                if (m := _STEP_LINE.match(line))}


def _worker_run(nproc: int, delay_ms: float, steps: int, device: str, log_dir: Path,
                timeout_s: float, pattern: str = "uniform") -> dict[str, Any]:
    """One launch of the training worker, as a study launches it (single, or ddp under
    torchrun), with `delay_ms` injected into its steps in `pattern`: its metrics and
    details, and the samples/s the parent's clock gives over each epoch's timed steps
    (median over epochs). On CUDA that clock is the host's after a synchronize (rank 0's
    step line waits for the loss), independent of the CUDA events under test."""
    from benchlib.launch.launcher import launch

    env = dict(os.environ)
    if device == "cpu":  # a step this small gains nothing from a second thread; on a shared
        # 2-core host two spin-waiting threads made it 100x slower (0.33 s, not 2 ms)
        env.setdefault("OMP_NUM_THREADS", "1")
    params = {**GROUND_TRUTH_RUN, "max_steps": steps, "device": device,
              "inject_step_delay_ms": delay_ms, "inject_delay_pattern": pattern}
    stamps = LogStamps(log_dir / "rank0.log")
    stamps.start()
    try:
        out = launch("single" if nproc == 1 else "ddp", params, log_dir,
                     "single" if nproc == 1 else "torchrun", nproc=nproc, timeout_s=timeout_s,
                     env=env)
    finally:
        at = stamps.steps()
    warmup, samples = GROUND_TRUTH_RUN["warmup_steps"], nproc * GROUND_TRUTH_RUN["batch_size"]
    parent = []
    for epoch in range(GROUND_TRUTH_RUN["epochs"]):  # global step numbers, from 1
        first, last = epoch * steps + warmup, (epoch + 1) * steps
        if first in at and last in at:
            parent.append((last - first) * samples / (at[last] - at[first]))
    return {"metrics": out.result["metrics"], "details": out.result.get("details") or {},
            "log_dir": str(log_dir), "wall_s": out.wall_s,
            "parent_samples_per_s": statistics.median(parent) if parent else float("nan"),
            "parent_epochs": len(parent)}


def check(name: str, expected: float, measured: float,
          tolerance: float = TOLERANCE) -> dict[str, Any]:
    """One ground-truth check: `measured` against the `expected` truth, within `tolerance`."""
    error = measured / expected - 1
    return {"check": name, "expected": expected, "measured": measured, "error": error,
            "tolerance": tolerance, "passed": abs(error) <= tolerance}


# Each pattern's launches: which ranks it runs on (slow_rank needs two)
PATTERN_RANKS = {"uniform": (1, 2), "slow_warmup": (1,), "heavy_tail": (1,),
                 "slow_epoch": (1,), "slow_rank": (2,)}


def truth(pattern: str, delay_ms: float, base_s: float, steps: int, nproc: int) -> dict[str, float]:
    """The figures a record should hold for a launch whose steps take `base_s` plus the
    pattern's delay (`loops.delay_factor`), 3 epochs of `steps`, the first
    GROUND_TRUTH_RUN warm-up steps of each left out; a synchronous step lasts as long as
    its slowest rank's. samples_per_s: the median over epochs of each epoch's samples over
    its timed steps' time; batch_s: the median over epochs of the median timed step;
    warmup_s: the median over epochs of the warm-up steps' time; rank_skew: the slow
    rank's own work a step over the others' (slow_rank; 1.0 otherwise)."""
    warmup, epochs = GROUND_TRUTH_RUN["warmup_steps"], GROUND_TRUTH_RUN["epochs"]
    slow = loops.slow_rank(-1, nproc)

    def step_s(i: int, e: int, rank: int | None = None) -> float:
        ranks = range(nproc) if rank is None else (rank,)
        return base_s + max(delay_ms / 1e3 * loops.delay_factor(pattern, i, e, warmup, r == slow)
                            for r in ranks)

    rates, medians, warmups = [], [], []
    for e in range(epochs):
        timed = [step_s(i, e) for i in range(warmup, steps)]
        rates.append(nproc * GROUND_TRUTH_RUN["batch_size"] * len(timed) / sum(timed))
        medians.append(sorted(timed)[len(timed) // 2])
        warmups.append(sum(step_s(i, e) for i in range(warmup)))
    own = [step_s(warmup, 0, r) for r in range(nproc)]
    return {"samples_per_s": statistics.median(rates), "batch_s": statistics.median(medians),
            "warmup_s": statistics.median(warmups),
            "rank_skew": max(own) / statistics.median(o for r, o in enumerate(own)
                                                      if r != own.index(max(own)))
            if nproc > 1 else 1.0,
            # what a method blind to the pattern would report instead
            "mean_over_epochs": statistics.mean(rates),
            "with_warmup": nproc * GROUND_TRUTH_RUN["batch_size"] * steps
            / statistics.median(sum(step_s(i, e) for i in range(steps)) for e in range(epochs)),
            "median_step_rate": nproc * GROUND_TRUTH_RUN["batch_size"]
            / statistics.median(medians),
            "fast_rank_rate": nproc * GROUND_TRUTH_RUN["batch_size"] / min(own)}


# Per pattern, the figures its case checks beyond samples/s (the worker's and the parent's
# clock), and the misreading each would catch: the figure a method blind to the pattern
# reports, which the truth must be farther from than the tolerance (else the case could
# not fail)
CHECKED = {"uniform": (), "slow_warmup": ("warmup_s",), "heavy_tail": ("batch_s",),
           "slow_epoch": (), "slow_rank": ("rank_skew",)}
MISREAD = {"slow_warmup": ("with_warmup", "the warm-up counted in the window"),
           "heavy_tail": ("median_step_rate", "batch over the median step"),
           "slow_epoch": ("mean_over_epochs", "the mean over epochs"),
           "slow_rank": ("fast_rank_rate", "the fastest rank's own rate")}


def ground_truth(device: str, folder: Path, ranks: tuple[int, ...] = (1, 2),
                 delay_ms: float = 100.0, steps: int = 30, timeout_s: float = 300.0,
                 patterns: tuple[str, ...] = tuple(PATTERN_RANKS),
                 tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """For each pattern (`loops.DELAY_PATTERNS`) and each of its ranks that `ranks`
    allows, the worker with `delay_ms` injected in that pattern against the truth
    (`truth`): the samples/s its result holds (what its record would), the parent's clock
    over the same timed windows, and the pattern's own figure (CHECKED), each within
    `tolerance`; for slow_rank also the slowest rank named.

    The base step differs by device. On CPU the host sleeps and then does the step's work,
    in series: the base is the step of a launch without the delay, measured just before
    for each rank count (2-16 ms here, 2-14% of the step: more than the tolerance, so not
    neglected; load that changes between the two launches moves the truth, so run it on a
    quiet host). On CUDA the spin runs on the device while the host queues the step's
    other kernels, so the host's time hides under it and only the device's own work adds
    (0.66 ms with a 50 ms delay on an H100): the base is left out, and a delay of 100 ms
    keeps that under 1%; the parent's clock there is the host's wall clock after a
    synchronize, a truth the CUDA events under test do not make."""
    if delay_ms <= 0:
        raise UsageError(f"delay_ms: must be > 0 (the truth the figures are checked "
                         f"against), got {delay_ms}")
    if steps <= GROUND_TRUTH_RUN["warmup_steps"] + loops.TAIL_EVERY:
        raise UsageError(f"steps: must be > {GROUND_TRUTH_RUN['warmup_steps'] + loops.TAIL_EVERY}"
                         f" (the warm-up steps of each epoch, and a heavy tail's period), "
                         f"got {steps}")
    unknown = sorted(set(patterns) - set(PATTERN_RANKS))
    if unknown:
        raise UsageError(f"patterns: {unknown[0]!r} is not one of {', '.join(PATTERN_RANKS)}")
    checks, base = [], {}
    for pattern in patterns:
        for nproc in (n for n in PATTERN_RANKS[pattern] if n in ranks):
            if nproc not in base:
                base[nproc] = None
                if device == "cpu":
                    run = _worker_run(nproc, 0.0, steps, device,
                                      folder / f"{nproc}rank-delay0ms", timeout_s)
                    base[nproc] = run["metrics"]["samples_per_s"]
            samples = nproc * GROUND_TRUTH_RUN["batch_size"]
            base_s = samples / base[nproc] if base[nproc] else 0.0
            run = _worker_run(nproc, delay_ms, steps, device,
                              folder / f"{nproc}rank-{pattern}-{delay_ms:g}ms", timeout_s,
                              pattern)
            checks += _checks(pattern, nproc, delay_ms, base_s, base[nproc], steps, run,
                              tolerance)
    return checks


def _checks(pattern: str, nproc: int, delay_ms: float, base_s: float, base_sps: float | None,
            steps: int, run: dict[str, Any], tolerance: float) -> list[dict[str, Any]]:
    """One launch's checks against its pattern's truth."""
    m, expected = run["metrics"], truth(pattern, delay_ms, base_s, steps, nproc)
    where = (f"{pattern}, {nproc} rank{'s' if nproc > 1 else ''}, {delay_ms:g} ms + base "
             f"{base_s * 1e3:.2f} ms per step")
    about = {"pattern": pattern, "ranks": nproc, "delay_ms": delay_ms, "base_step_s": base_s,
             "base_samples_per_s": base_sps, "log_dir": run["log_dir"],
             "injected_step_delay_ms": m.get("injected_step_delay_ms"),
             "injected_delay_pattern": m.get("injected_delay_pattern")}
    rate = expected["samples_per_s"]
    found = [{**check(f"{where}: worker's samples/s", rate, m["samples_per_s"], tolerance), **about},
             {**check(f"{where}: parent's clock", rate, run["parent_samples_per_s"], tolerance),
              **about}]
    for figure in CHECKED[pattern]:
        found.append({**check(f"{where}: {figure}", expected[figure], m[figure], tolerance),
                      **about})
    if pattern == "slow_rank":  # the rank it slowed, named
        named = m.get("skew_rank")
        found.append({"check": f"{where}: slowest rank", "expected": nproc - 1,
                      "measured": named, "error": 0.0 if named == nproc - 1 else float("inf"),
                      "tolerance": 0.0, "passed": named == nproc - 1, **about})
    if pattern in MISREAD:  # what a method blind to the pattern would read: off by more
        figure, how = MISREAD[pattern]
        miss = expected[figure] / rate - 1
        for c in found[:1]:
            c.update(misread=how, misread_error=miss)
    return found


def ground_truth_lines(checks: list[dict[str, Any]]) -> list[str]:
    lines = []
    for c in checks:
        if c["check"].endswith("slowest rank"):
            lines.append(f"ground truth, {c['check']}: expected rank {c['expected']}, measured "
                         f"rank {c['measured']}: {'pass' if c['passed'] else 'FAIL'}")
            continue
        unit = "samples/s" if "samples/s" in c["check"] or "clock" in c["check"] else \
            "s" if c["check"].endswith("_s") else "x"
        lines.append(f"ground truth, {c['check']}: expected {c['expected']:,.4g} {unit}, "
                     f"measured {c['measured']:,.4g}, error {c['error']:+.2%}: "
                     f"{'pass' if c['passed'] else 'FAIL'} (within {c['tolerance']:.0%})"
                     + (f"; {c['misread']} would read {c['misread_error']:+.0%}"
                        if "misread" in c else ""))
    return lines
