"""The timed loops: every step's data time and compute time, warm-up kept apart.

Times are read on the device's own timeline (`timing.StepMarks`: CUDA events, one
synchronize per epoch; the host clock on CPU), so measuring does not stall the device:

    step_s     from the end of one step to the end of the next
    compute_s  from the moment the batch is handed over (moved to the device) to the
               end of the step: transfer, and (train) forward, backward, optimizer step
    data_s     the rest of the step: how long the device waited for the next batch

`traverse` only iterates and moves batches (seed 000's --test_tranverse_time);
`train` runs the full step with SGD (seed 000's default lr 1e-3). A `StepDelay` adds a
known time to every step: the truth `benchlib calibrate --ground-truth` checks against.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from benchlib.config.choices import FP8_RECIPES, MODES
from benchlib.core import compiler
from benchlib.core.delays import StepDelay
from benchlib.core.timing import StepMarks
from benchlib.errors import ConfigError


@dataclass
class EpochTimes:
    """One epoch: per-step times (warm-up steps flagged) and the epoch's wall time."""

    data_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    warmup: list[bool] = field(default_factory=list)
    # a train step's compute split where the Stepper marked it: its forward and loss, its
    # backward (DDP's all-reduce runs inside it), the optimizer's step the rest
    forward_s: list[float] = field(default_factory=list)
    backward_s: list[float] = field(default_factory=list)
    epoch_s: float = 0.0
    loss_first: float | None = None
    loss_last: float | None = None

    def timed(self) -> tuple[list[float], list[float], list[int]]:
        """(data_s, compute_s, samples) of the steps after warm-up."""
        keep = [i for i, w in enumerate(self.warmup) if not w]
        return ([self.data_s[i] for i in keep], [self.compute_s[i] for i in keep],
                [self.samples[i] for i in keep])


PREFETCH_FACTOR = 2  # DataLoader's default: batches each worker fetches ahead


def steady_state_warmup(warmup_steps: int, num_workers: int) -> tuple[int, str]:
    """Steps to leave out at an epoch's start, and why: the warm-up asked for, or, when
    more, the batches the workers prefetched while the loop was starting (prefetch
    factor x workers): they come for free and would inflate samples/s."""
    prefetched = PREFETCH_FACTOR * num_workers
    if prefetched > warmup_steps:
        return prefetched, (f"{prefetched} batches prefetched by {num_workers} workers during "
                            f"start-up (more than warmup_steps {warmup_steps})")
    return warmup_steps, "warmup_steps"


class IndexBatches(torch.utils.data.Sampler):
    """Each batch's indices as one tensor, a slice of one permutation per epoch: for data
    sets that fetch a whole batch by tensor indexing (`fetches_batches`), so that no list
    of `batch_size` Python ints is built, passed and converted per batch."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, generator: torch.Generator):
        self.n, self.batch_size, self.shuffle, self.generator = n, batch_size, shuffle, generator

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)

    def __iter__(self):
        order = torch.randperm(self.n, generator=self.generator) if self.shuffle else torch.arange(self.n)
        return iter(order.split(self.batch_size))


class BatchLoader:
    """What a DataLoader without workers does for a data set that fetches whole batches,
    without its per-batch machinery (fetcher, collate dispatch, pinning checks): each
    batch is `collate_fn(dataset[index tensor])`, pinned for CUDA; the same batches in the
    same order. That machinery cost about as much as the gather itself for preload_batched:
    with index_select and this loader, `python -m benchlib calibrate --path DATA` gives
    39-52% of the contiguous-copy ceiling on a quiet 2-core machine (21% before both)."""

    def __init__(self, dataset, sampler: IndexBatches, collate_fn, pin: bool):
        self.dataset, self.sampler, self.collate_fn, self.pin = dataset, sampler, collate_fn, pin

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        for index in self.sampler:
            batch = self.collate_fn(self.dataset[index])
            yield tuple(t.pin_memory() for t in batch) if self.pin else batch


def shard_loader(dataset: IterableDataset, collate_fn, batch_size: int, num_workers: int,
                 device: torch.device, prefetch_factor: int | None = None) -> DataLoader:
    """A DataLoader over shards (benchlib.shards), whose library shuffles them and splits
    them across ranks and workers; its workers started as the data set asks (`worker_start`:
    fork, forkserver or spawn; None: the default, fork), each fetching `prefetch_factor`
    batches ahead (None: the DataLoader's 2)."""
    workers = num_workers > 0
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                      collate_fn=collate_fn, pin_memory=device.type == "cuda",
                      prefetch_factor=prefetch_factor if workers else None,
                      multiprocessing_context=getattr(dataset, "worker_start", None)
                      if workers else None)


def make_loader(dataset, collate_fn, batch_size: int, num_workers: int, device: torch.device,
                seed: int, shuffle: bool = True, lean: bool = False) -> DataLoader | BatchLoader:
    """A DataLoader over `dataset`; one that fetches whole batches gets its batches' index
    tensors. `lean`: with no workers, such a data set is iterated by a BatchLoader (the IO
    study and calibrate, which measure the data path; the trainers keep DataLoaders, which
    Lightning shards across ranks)."""
    if isinstance(dataset, IterableDataset):  # shards: their library shuffles and splits them
        return shard_loader(dataset, collate_fn, batch_size, num_workers, device)
    generator = torch.Generator().manual_seed(seed)
    if getattr(dataset, "fetches_batches", False):  # dataset[index tensor] is a whole batch
        sampler = IndexBatches(len(dataset), batch_size, shuffle, generator)
        if lean and num_workers == 0:
            return BatchLoader(dataset, sampler, collate_fn, pin=device.type == "cuda")
        return DataLoader(dataset, batch_size=None, num_workers=num_workers,
                          sampler=sampler, collate_fn=collate_fn, pin_memory=device.type == "cuda")
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                      collate_fn=collate_fn, pin_memory=device.type == "cuda",
                      generator=generator, drop_last=False)


# float8 training: what its recipe does not convert runs in bf16 (benchlib.trainers.fp8)
AUTOCAST = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16,
            **dict.fromkeys(FP8_RECIPES, torch.bfloat16)}


def set_matmul_precision(precision: str) -> None:
    """fp32 means fp32: cuDNN's TF32 default is switched off; tf32 switches it on for
    matmuls and convolutions (Ampere and newer)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


class Objective:
    """What a step minimises: the model's own `.loss` (a transformers model, given the
    labels), a loss function of the user's (`loss: pkg.module:function(output, labels)`),
    or cross-entropy, over the last dimension of the output (a language model's logits
    against token ids included)."""

    def __init__(self, loss: Callable[..., torch.Tensor] | None = None, labels_kw: bool = False):
        self.loss, self.labels_kw = loss, labels_kw
        self.cross_entropy = nn.CrossEntropyLoss()

    def __call__(self, forward: Callable[..., Any], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = forward(x, labels=y) if self.labels_kw else forward(x)
        own = getattr(out, "loss", None)
        if own is not None:
            return own
        if self.loss is not None:
            return self.loss(out, y)
        logits = getattr(out, "logits", out)
        if y.dim() >= 2 and logits.dim() == y.dim() + 1:  # per-token labels
            return self.cross_entropy(logits.flatten(0, -2), y.flatten())
        return self.cross_entropy(logits, y)



class Stepper:
    """What one step does after the batch arrives: move it, and (train) learn from it,
    in the given precision (fp32, tf32, amp_bf16, amp_fp16 with a gradient scaler),
    memory format (channels_last) and torch.compile mode (benchlib.core.compiler: off,
    default, reduce-overhead, max-autotune; true is default); `objective` says
    what the step minimises (cross-entropy unless told); `step_delay_ms` adds that known
    time to every step, `delay` a pattern of them (a `StepDelay`: ground truth, never a
    real run)."""

    def __init__(self, mode: str, device: torch.device, model: nn.Module | None = None,
                 lr: float = 1e-3, momentum: float = 0.0, precision: str = "fp32",
                 channels_last: bool = False, compile: str | bool = "off",
                 step_delay_ms: float = 0.0, objective: Objective | None = None,
                 delay: StepDelay | None = None):
        if mode not in MODES:
            raise ConfigError("mode", f"{mode!r} is not one of {', '.join(MODES)}")
        self.mode, self.device = mode, device
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format) if model is not None else None
        self.autocast = AUTOCAST.get(precision)
        self.scaler = torch.amp.GradScaler(device.type) if precision == "amp_fp16" else None
        self.delay = delay or StepDelay(step_delay_ms, device)
        self.marks: StepMarks | None = None  # set by run_epoch: forward and backward marked
        self.phases: list[tuple[Any, Any]] = []  # (after the loss, after backward) a step
        if mode == "train":
            if model is None:
                raise ConfigError("mode", "train needs a model")
            set_matmul_precision(precision)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
            self.objective = objective or Objective()
            self.forward = compiler.whole(self.model, compile)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> float | None:
        non_blocking = self.device.type == "cuda"
        x = x.to(self.device, non_blocking=non_blocking)
        y = y.to(self.device, non_blocking=non_blocking)
        self.delay()  # after the hand-over mark: inside the step's compute time
        if self.mode == "traverse":
            return None
        if x.dim() == 4:
            x = x.contiguous(memory_format=self.memory_format)
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            loss = self.objective(self.forward, x, y)
        forward = self.marks.mark() if self.marks is not None else None
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        if self.marks is not None:
            self.phases.append((forward, self.marks.mark()))
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss


def run_epoch(loader: Iterable, step: Stepper, warmup_steps: int, max_steps: int | None = None,
              profiler: Any = None, on_step: Callable[[Any], None] | None = None,
              on_timed: Callable[[], None] | None = None) -> EpochTimes:
    """One pass over `loader`; the first `warmup_steps` steps are flagged as warm-up.
    `on_step(loss)` runs after each step (logging, recording, fault injection);
    `on_timed()` once, where the timed steps begin: after the last warm-up step, before
    the next batch is fetched (an energy meter's edge, benchlib.core.energy)."""
    marks = StepMarks(step.device)
    step.marks, step.phases = marks, []  # a train step marks its forward and backward
    times = EpochTimes()
    step.delay.start_epoch()
    ends, handed, loss = [], [], None
    marks.wait()  # nothing queued before the epoch counts towards it
    host_start = time.perf_counter()
    ends.append(marks.mark())
    iterator = iter(loader)
    try:
        while max_steps is None or len(times.samples) < max_steps:
            if on_timed is not None and len(times.samples) == warmup_steps:
                on_timed()
            try:
                x, y = next(iterator)
            except StopIteration:
                break
            handed.append(marks.mark())
            loss = step(x, y)
            ends.append(marks.mark())
            if loss is not None and times.loss_first is None:
                times.loss_first = loss.item()
            times.samples.append(len(y))
            times.warmup.append(len(times.samples) <= warmup_steps)
            if profiler is not None:
                profiler.step()
            if on_step is not None:
                on_step(loss)
    except BaseException:
        # a failed epoch's DataLoader workers end now: the traceback holds their iterator, so
        # they would outlive the caller's clean-up (and write into what it removed)
        getattr(iterator, "_shutdown_workers", lambda: None)()
        raise
    marks.wait()
    times.epoch_s = time.perf_counter() - host_start
    for before, at, end in zip(ends, handed, ends[1:]):
        times.data_s.append(marks.seconds(before, at))
        times.compute_s.append(marks.seconds(at, end))
    if len(step.phases) == len(handed):  # every step marked (a train step; not traverse)
        times.forward_s = [marks.seconds(at, f) for at, (f, _) in zip(handed, step.phases)]
        times.backward_s = [marks.seconds(f, b) for f, b in step.phases]
    step.marks, step.phases = None, []
    if loss is not None:
        times.loss_last = loss.item()
    return times


def _activities(device: torch.device) -> list[Any]:
    """What torch.profiler records on `device`: the CPU, and CUDA's kernels on a GPU."""
    import os

    from torch.profiler import ProfilerActivity

    if device.type == "cuda":
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    # kineto's own stderr lines (profiler_start/stop, "ERROR ... gpuGetDeviceCount failed"
    # on a host without CUDA) say nothing about a CPU run; read at its first use
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    return [ProfilerActivity.CPU]


def trace_steps(loader: Iterable, step: Stepper, steps: int, trace_file: Path) -> None:
    """`steps` steps under torch.profiler, written as one Kineto (Chrome) trace: the first
    warms the profiler up, the others are marked ProfilerStep#N, the iterations Holistic
    Trace Analysis cuts the trace into. In a process group the trace carries its
    distributedInfo (rank, world size), which HTA reads to tell one rank's file from
    another's. Kept apart from the timed steps: the profiler costs time."""
    from torch.profiler import profile, schedule

    trace_file.parent.mkdir(parents=True, exist_ok=True)
    warmup = 1 if steps > 1 else 0
    with profile(activities=_activities(step.device), record_shapes=False,
                 schedule=schedule(wait=0, warmup=warmup, active=steps - warmup, repeat=1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(str(trace_file))) as prof:
        run_epoch(loader, step, warmup_steps=0, max_steps=steps, profiler=prof)


def profile_steps(loader: DataLoader, step: Stepper, steps: int, trace_file: Path | None,
                  top: int = 15) -> list[dict[str, Any]]:
    """`steps` steps under torch.profiler (CPU, and CUDA when the device is CUDA); the top
    operators by self time. Kept apart from the timed repeats: the profiler costs time."""
    from torch.profiler import profile

    with profile(activities=_activities(step.device), record_shapes=False) as prof:
        run_epoch(loader, step, warmup_steps=0, max_steps=steps)
    if trace_file is not None:
        trace_file.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_file))
    device_key = "self_device_time_total" if step.device.type == "cuda" else None
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, device_key or "self_cpu_time_total"),
                    reverse=True)
    rows = []
    for e in events[:top]:
        row = {"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
               "cpu_total_ms": e.cpu_time_total / 1e3}
        if device_key:
            row["self_cuda_ms"] = getattr(e, device_key) / 1e3
        rows.append(row)
    return rows
