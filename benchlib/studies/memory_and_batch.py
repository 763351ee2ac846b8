"""The memory and batch study (notebook 15, `python -m benchlib maxbatch`): the largest
per-device batch that trains, found on real training steps.

Each batch tried is a fresh `python -m benchlib.workers.batch_trial` process: a few
training steps, their samples/s and peak memory. From `start_batch` the batch doubles
until one does not fit (or `max_batch` is reached), then bisection between the last
batch that fit and the first that did not, so the boundary is exact: the largest batch
fits and the next one up does not. A batch does not fit when CUDA runs out of memory,
when the peak (RSS on CPU, reserved on CUDA) passes `memory_limit`, or when the OS kills
the process; each is a row of the result ("does not fit in N GiB at batch B"), never a
failed run.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchlib import paths
from benchlib.config import MemoryAndBatchConfig
from benchlib.config.choices import model_kind
from benchlib.config.memory_and_batch import CLASSES, TRIAL_FIELDS
from benchlib.distributed.device import uses_cuda
from benchlib.errors import ConfigError, LaunchError
from benchlib.launch.launcher import launch
from benchlib.studies import checks


@dataclass
class BatchSearch:
    metrics: dict[str, Any]
    details: dict[str, Any]  # "trials": one row per batch tried, in the order tried


def search(fits: Callable[[int], bool], start: int, cap: int) -> tuple[int | None, int | None]:
    """(the largest batch that fits, the smallest that does not), trying batches by
    `fits`: doubling from `start` up to `cap`, then bisection between the two. None for
    the first when `start` does not fit, for the second when `cap` fits."""
    fit, misfit, batch = None, None, start
    while True:
        if fits(batch):
            fit = batch
            if batch == cap:
                return fit, None
            batch = min(2 * batch, cap)
        else:
            misfit = batch
            break
    if fit is None:
        return None, misfit
    while misfit - fit > 1:
        mid = (fit + misfit) // 2
        if fits(mid):
            fit = mid
        else:
            misfit = mid
    return fit, misfit


def trial_params(cfg: MemoryAndBatchConfig, batch: int) -> dict[str, Any]:
    """The batch_trial worker's parameters (its run.json) for one batch: the fields its
    flags are generated from, by name (TRIAL_FIELDS), and the batch, its shape and the
    limit in bytes."""
    return {**{name: getattr(cfg, name) for name in TRIAL_FIELDS}, "batch_size": batch,
            "in_shape": "x".join(map(str, cfg.input_shape())),
            "memory_limit_bytes": cfg.memory_limit_bytes() or 0}


def preflight(cfg: MemoryAndBatchConfig) -> None:
    """The device is here; on the CPU a limit is given (else the search would run until
    the OS kills the machine's biggest process, maybe not ours); a model of the user's
    takes 2 samples of the batches' shape to a score per class."""
    if not uses_cuda(cfg.device) and cfg.memory_limit_bytes() is None:
        raise ConfigError("memory_limit", "the CPU search needs a limit (4GiB, 512MiB, ...): "
                          "without one it runs until the OS kills a process")
    if model_kind(cfg.model) != "builtin":
        from benchlib.core.models import build_model

        checks.image_model_takes(
            lambda: build_model(cfg.model, cfg.input_shape(), cfg.depth, cfg.alpha,
                                model_args=cfg.model_args, num_classes=CLASSES),
            cfg.model, cfg.input_shape(), CLASSES)


def _killed_row(cfg: MemoryAndBatchConfig, batch: int, error: LaunchError) -> dict[str, Any] | None:
    """A trial the OS killed (SIGKILL: the kernel's out-of-memory killer) as a row that
    does not fit; None for any other failure, which stays a failure."""
    if error.exit_code not in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return None
    return {"batch_size": batch, "fits": False, "samples_per_s": None, "peak_bytes": None,
            "memory_limit_bytes": cfg.memory_limit_bytes(),
            "why": f"killed by the OS (signal {signal.SIGKILL}); log: {error.log_path}"}


def run(cfg: MemoryAndBatchConfig, run_id: str = "interactive") -> BatchSearch:
    preflight(cfg)
    log_dir = paths.outputs_dir() / "logs" / run_id
    trials: list[dict[str, Any]] = []

    def fits(batch: int) -> bool:
        try:
            out = launch("batch_trial", trial_params(cfg, batch), log_dir / f"batch-{batch}",
                         "single", 1, timeout_s=cfg.timeout_s)
            row = out.result["details"]["trial"]
        except LaunchError as e:
            row = _killed_row(cfg, batch, e)
            if row is None:
                raise
        trials.append(row)
        return row["fits"]

    largest, misfit = search(fits, cfg.start_batch, cfg.max_batch)
    by_batch = {t["batch_size"]: t for t in trials}
    best = by_batch.get(largest, {})
    known = next((t for t in trials if t.get("device_name")), {})
    limit = cfg.memory_limit_bytes() or known.get("device_total_bytes")
    metrics = {
        "largest_batch": largest, "smallest_batch_not_fitting": misfit,
        "largest_batch_samples_per_s": best.get("samples_per_s"),
        "largest_batch_peak_bytes": best.get("peak_bytes"),
        "peak_kind": known.get("peak_kind"), "limit_bytes": limit,
        "limit_source": "memory_limit" if cfg.memory_limit else "device memory",
        "batches_tried": len(trials), "device_name": known.get("device_name"),
        "log_dir": str(log_dir)}
    metrics["boundary"] = boundary_sentence(metrics, cfg.max_batch)
    return BatchSearch(metrics, {"trials": sorted(trials, key=lambda t: t["batch_size"])})


def size_text(n: int | None) -> str:
    """Bytes for people: 1.5 GiB, 731 MiB."""
    if n is None:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{n} B"


def boundary_sentence(m: dict[str, Any], cap: int) -> str:
    """The result in words: the largest batch, and where it stops fitting."""
    limit = size_text(m["limit_bytes"])
    if m["largest_batch"] is None:
        return f"Does not fit in {limit} even at batch {m['smallest_batch_not_fitting']}."
    head = (f"The largest batch that trains is {m['largest_batch']} "
            f"({m['largest_batch_samples_per_s']:,.1f} samples/s, peak "
            f"{size_text(m['largest_batch_peak_bytes'])})")
    if m["smallest_batch_not_fitting"] is None:
        return f"{head}; it is the max_batch cap ({cap}): the boundary in {limit} lies above it."
    return f"{head}; it does not fit in {limit} at batch {m['smallest_batch_not_fitting']}."


def describe(cfg: MemoryAndBatchConfig, result: BatchSearch) -> str:
    m = result.metrics
    return (f"{cfg.model} on {m['device_name']}, {'x'.join(map(str, cfg.input_shape()))} "
            f"inputs, {m['batches_tried']} batches tried: {m['boundary']}")
