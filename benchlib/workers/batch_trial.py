"""`python -m benchlib.workers.batch_trial`: a few real training steps at one batch size,
and the memory they took (benchlib.core.memory). One process per batch tried, so that
each starts with nothing cached and a crash of one is not the search's.

The model and its batch are the training studies' (benchlib.trainers.job): any model
they take, a batch of synthetic images or tokens made for it (a prepared data set's
images as synthetic ones of its shape: the search measures memory, not IO), or the first
items of a data set of your own through its collate; trained in the row's precision
(float8: its linears converted as benchlib.trainers.fp8 says; emulated, no speed),
memory format, compiled or not (each trial in an inductor cache of its own, cold: its
compile's seconds, graph breaks and recompiles in its row), its blocks checkpointed or
not. The window of peak memory
starts before the model reaches the device (on the CPU, the model's own bytes are above
the RSS the process held before it was built), so parameters, gradients, optimizer state
and activations all count; one more step, profiled, says what the memory held at its
peak. A batch that does not fit is a result, not a failure: CUDA's OutOfMemoryError, a
cuBLAS or cuDNN allocation failure (or the CPU allocator's refusal) is caught and
reported, as is a peak over `--memory-limit-bytes`.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchlib.config.flags import add_config_flags
from benchlib.config.memory_and_batch import TRIAL_FIELDS, MemoryAndBatchConfig, job_fields
from benchlib.config.performance import compile_mode, compiled
from benchlib.core import compile_cost, compiler, memory
from benchlib.core.loops import Stepper
from benchlib.distributed import fsdp
from benchlib.distributed.env import DistEnv
from benchlib.errors import ConfigError
from benchlib.trainers import fp8
from benchlib.trainers.job import build_job
from benchlib.workers.bootstrap import entry

# What a RuntimeError says when memory ran out outside PyTorch's caching allocator: the
# CPU allocator; cuBLAS and cuDNN creating a handle or workspace near the edge (seen on
# an H200, docs/gpu-check/2026-11-28-h200-run5.md: batch 1702 of ResNet-50 failed in
# cublasCreate while 1704 raised OutOfMemoryError); the CUDA runtime's own error
OUT_OF_MEMORY_MESSAGES = ("can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED",
                          "CUDNN_STATUS_ALLOC_FAILED", "CUDA error: out of memory")


def out_of_memory(error: BaseException) -> bool:
    """CUDA's OutOfMemoryError, or another allocation that failed for want of memory
    (OUT_OF_MEMORY_MESSAGES); any other error is a failure, not a batch that does not fit."""
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and any(m in str(error) for m in OUT_OF_MEMORY_MESSAGES))


def _steps(args: argparse.Namespace, stepper: Stepper, x: torch.Tensor, y: torch.Tensor,
           device: torch.device) -> tuple[float, list[float]]:
    """The warm-up steps, each timed (where a compile happens), then the timed ones:
    (seconds per timed step, each warm-up step's seconds; the device synchronized at the
    end of each)."""
    warm = []
    for _ in range(args.warmup_steps):
        start = time.perf_counter()
        stepper(x, y).item()  # waits for the step
        warm.append(time.perf_counter() - start)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    timed = args.steps - args.warmup_steps
    for _ in range(timed):
        loss = stepper(x, y)
    loss.item()  # waits for the last step
    return (time.perf_counter() - start) / timed, warm


def _compile_figures(args: argparse.Namespace, stepper: Stepper, job, x: torch.Tensor,
                     y: torch.Tensor, warm: list[float], step_s: float) -> dict:
    """A compiled trial's compile: its warm-up steps' seconds less as many timed steps
    (core.compile_cost.in_launch; no eager process beside it), from its own cold cache,
    its recompiles and its forward's graph breaks on a batch of 2 (core.compiler)."""
    own = compile_cost.in_launch([*warm, step_s], args.warmup_steps)
    if own["compile_s"] is not None:
        own["compile_s_of"] = (f"the first {len(warm)} step(s) less {len(warm)} x the timed "
                               "steps' mean")
    figures, details = compiler.figures(stepper.model, x[:2], args.compile,
                                        lambda m, b: m(b, labels=y[:2])
                                        if job.objective.labels_kw else m(b))
    return {**own, "compile_cache": "cold", **figures, **details}


def trial(args: argparse.Namespace, env: DistEnv, device: torch.device, backend: str) -> dict:
    if device.type != "cuda":  # libraries' code loaded on first use: not the model's bytes
        memory.warm_kernels()
    torch.manual_seed(args.seed)
    job = build_job(argparse.Namespace(**job_fields(args), augment=False))
    peak = memory.PeakMemory(device, job.rss_before_model if device.type != "cuda"
                             else memory.baseline_bytes(device))
    peak.reset()
    # its linears swapped (on the device, inside the window), before the blocks are wrapped
    float8 = fp8.for_job(args, job, device)
    stepper, samples_per_s, step_s, error, warm = None, None, None, None, []
    if compiled(args.compile):  # a cache of its own, empty: never one an earlier process left
        compiler.own_cache()
    try:
        x, y = (t.to(device) for t in job.batch(args.batch_size, args.seed))
        model = fsdp.checkpoint_blocks(job.model, args.ac)
        if compile_mode(args.compile) == "regional":  # each block, as the trainers compile it
            compiler.regions(fsdp.require_blocks(model, "compile", "regional"))
        stepper = Stepper("train", device, model, lr=args.lr, momentum=0.9,
                          precision=args.precision, channels_last=args.channels_last,
                          compile=args.compile, objective=job.objective)
        step_s, warm = _steps(args, stepper, x, y, device)
        # an emulated FP8 trial measures memory, and no speed
        samples_per_s = args.batch_size / step_s if not (float8 and float8.emulated) else None
    except (torch.OutOfMemoryError, RuntimeError) as e:
        if not out_of_memory(e):
            raise
        error = " ".join(str(e).split())[:300]
    figures = peak.read()
    limit = args.memory_limit_bytes or None
    if error is not None:
        fits, why = False, f"out of memory: {error}"
    elif limit is not None and figures["peak_bytes"] > limit:
        fits, why = False, f"peak {figures['peak_bytes']} B ({figures['peak_kind']}) over the limit {limit} B"
    else:
        fits, why = True, ""
    # what the memory held at the peak: one more step, profiled (a batch that fits only)
    at_peak = memory.parts_at_peak(lambda: stepper(x, y), device) if fits else None
    parts = memory.breakdown(stepper.model, stepper.optimizer, figures["model_peak_bytes"],
                             at_peak) if stepper is not None else {}
    total = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    compiling = _compile_figures(args, stepper, job, x, y, warm, step_s) \
        if fits and compiled(args.compile) else {}
    row = {"batch_size": args.batch_size, "fits": fits, "why": why, **compiling,
           "samples_per_s": samples_per_s, "step_s": step_s, "memory_limit_bytes": limit,
           "device_total_bytes": total, "device_name": _device_name(device), **figures, **parts,
           **(float8.figures(None) if float8 else {}),
           **{k: job.described[k] for k in ("model_class", "model_source_sha", "model_source")}}
    print(f"batch {args.batch_size}: {'fits' if fits else 'does not fit'}"
          f"{'' if fits else ' (' + why + ')'}; peak {figures['peak_bytes']} B "
          f"({figures['peak_kind']})", flush=True)
    return {"metrics": {k: row[k] for k in ("batch_size", "fits", "samples_per_s", "peak_bytes")},
            "details": {"trial": row}}


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def check(args: argparse.Namespace) -> None:
    if args.batch_size < 1:
        raise ConfigError("batch_size", f"must be >= 1, got {args.batch_size}")
    if args.steps <= args.warmup_steps:
        raise ConfigError("steps", f"{args.steps} leaves no timed step after "
                          f"{args.warmup_steps} warm-up step(s)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="benchlib.workers.batch_trial", description=__doc__)
    # notebook 15's fields (the device is the bootstrap's flag, from the same field)
    add_config_flags(p, MemoryAndBatchConfig, only=[n for n in TRIAL_FIELDS if n != "device"])
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--memory-limit-bytes", type=int, default=0,
                   help="a peak over this does not fit (0: no limit)")
    return p


if __name__ == "__main__":
    raise SystemExit(entry(trial, parser(), check=check))
