"""`benchlib calibrate --ground-truth`: the real worker path (launch, worker, trainer,
warm-up left out, slowest rank, median over epochs) on a tiny step that a known delay
dominates, the delay varying by step, epoch and rank in a known pattern (a slow warm-up,
a heavy tail, a slow epoch, a slow rank: benchlib.core.delays); the figures the worker's
result holds, and the samples/s the parent's own clock gives over the same timed
windows, against the pattern's truth (`truth`). calibrate's clock check compares one
chain of marks with itself; this one has a truth that no clock made, and each case
prints what a method blind to it would read."""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from benchlib.core import delays
from benchlib.errors import UsageError

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
    from benchlib.studies.repeats import Launch, launch_all

    env = dict(os.environ)
    if device == "cpu":  # a step this small gains nothing from a second thread; on a shared
        # 2-core host two spin-waiting threads made it 100x slower (0.33 s, not 2 ms)
        env.setdefault("OMP_NUM_THREADS", "1")
    params = {**GROUND_TRUTH_RUN, "max_steps": steps, "device": device,
              "inject_step_delay_ms": delay_ms, "inject_delay_pattern": pattern}
    stamps = LogStamps(log_dir / "rank0.log")
    stamps.start()
    try:
        [out] = launch_all([Launch("single" if nproc == 1 else "ddp", params,
                                   "single" if nproc == 1 else "torchrun", nproc,
                                   timeout_s=timeout_s, options={"env": env})], log_dir)
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
    pattern's delay (`delays.delay_factor`), 3 epochs of `steps`, the first
    GROUND_TRUTH_RUN warm-up steps of each left out; a synchronous step lasts as long as
    its slowest rank's. samples_per_s: the median over epochs of each epoch's samples over
    its timed steps' time; batch_s: the median over epochs of the median timed step;
    warmup_s: the median over epochs of the warm-up steps' time; rank_skew: the slow
    rank's own work a step over the others' (slow_rank; 1.0 otherwise)."""
    warmup, epochs = GROUND_TRUTH_RUN["warmup_steps"], GROUND_TRUTH_RUN["epochs"]
    slow = delays.slow_rank(-1, nproc)

    def step_s(i: int, e: int, rank: int | None = None) -> float:
        ranks = range(nproc) if rank is None else (rank,)
        return base_s + max(delay_ms / 1e3 * delays.delay_factor(pattern, i, e, warmup, r == slow)
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
    """For each pattern (`config.choices.DELAY_PATTERNS`) and each of its ranks that `ranks`
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
    if steps <= GROUND_TRUTH_RUN["warmup_steps"] + delays.TAIL_EVERY:
        raise UsageError(f"steps: must be > {GROUND_TRUTH_RUN['warmup_steps'] + delays.TAIL_EVERY}"
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
    if pattern in MISREAD:  # what a method blind to the pattern would read, on the first line
        figure, how = MISREAD[pattern]
        found[0].update(misread=how, misread_error=expected[figure] / rate - 1)
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
