"""The memory and batch study (notebook 15, `python -m benchlib maxbatch`): the largest
per-device batch that trains, found on real training steps and confirmed.

Each batch tried is a fresh `python -m benchlib.workers.batch_trial` process: a few
training steps of the row's model and data in its precision, memory format, compile and
checkpointing, their samples/s and peak memory. Which batch to try next, and when the
answer holds, is benchlib.studies.batch_search's: the next batch aimed at the limit by
the peaks measured so far, the largest batch that fits and the first that does not each
confirmed by `confirm` fresh processes. A batch does not fit when CUDA runs out of
memory (cuBLAS and cuDNN allocation failures included), when the peak (RSS on CPU,
reserved on CUDA) passes `memory_limit`, or when the OS kills the process; each is a row
of the result ("does not fit in N GiB at batch B"), never a failed run.
"""

from __future__ import annotations

import argparse
import math
import signal
import statistics
from dataclasses import dataclass
from typing import Any

from benchlib.config import MemoryAndBatchConfig
from benchlib.config.memory_and_batch import TRIAL_FIELDS, job_fields
from benchlib.config.performance import compiled
from benchlib.core import compile_cost
from benchlib.distributed.device import check_precision, uses_cuda
from benchlib.errors import ConfigError, LaunchError
from benchlib.studies import batch_search, checks, repeats
from benchlib.studies.repeats import Launch


@dataclass
class BatchSearch:
    metrics: dict[str, Any]
    details: dict[str, Any]  # "trials": one row per process, by batch and in the order run


def launches(cfg: MemoryAndBatchConfig, run_id: str = "interactive", batch: int | None = None,
             process: int = 1) -> list[Launch]:
    """The trial of one batch (default `start_batch`), the search's `process`-th: one
    batch_trial process. The search is adaptive: `run` asks for each trial's launch as the
    batches measured so far choose it, and runs it by the one loop."""
    batch = cfg.start_batch if batch is None else batch
    return [Launch("batch_trial", _trial_params(cfg, batch), timeout_s=cfg.timeout_s,
                   log=f"batch-{batch}-{process}", role="trial", repeat=process - 1)]


def _trial_params(cfg: MemoryAndBatchConfig, batch: int) -> dict[str, Any]:
    """The batch_trial worker's parameters (its run.json) for one batch: the fields its
    flags are generated from, by name (TRIAL_FIELDS), and the batch and the limit in bytes."""
    return {**{name: getattr(cfg, name) for name in TRIAL_FIELDS}, "batch_size": batch,
            "memory_limit_bytes": cfg.memory_limit_bytes() or 0}


def preflight(cfg: MemoryAndBatchConfig) -> None:
    """The device and the precision are here; on the CPU a limit is given (else the search
    would run until the OS kills the machine's biggest process, maybe not ours); the model
    and data are built on the CPU as a trial builds them and take one step's forward and
    loss on a batch of 2 (a model of the user's that gives no score per class, data that
    does not fit it: one line naming the parameter), checkpointing finds blocks, and the
    model trains on a batch of `start_batch` (a batch norm over one value per channel
    does not)."""
    cuda = uses_cuda(cfg.device)
    check_precision(cfg.precision, "cuda" if cuda else "cpu")
    if not cuda and cfg.memory_limit_bytes() is None:
        raise ConfigError("memory_limit", "the CPU search needs a limit (4GiB, 512MiB, ...): "
                          "without one it runs until the OS kills a process")
    if compiled(cfg.compile) and cfg.compile_cache == "warm":
        raise ConfigError("compile_cache", "warm: each trial compiles cold, in a cache of its "
                          "own (no process primes one for the search); use cold")
    from benchlib.trainers.job import build_job

    fields = argparse.Namespace(**job_fields(cfg))
    job = build_job(fields)
    job.check(cfg.model)
    checks.blocks_fit(fields, job)
    if cfg.start_batch < 2:
        x, y = job.batch(cfg.start_batch, cfg.seed)
        try:
            job.objective(job.model.train(), x, y)  # forward and loss: no gradient kept
        except ValueError as e:  # torch's batch-size checks (a batch norm over 1 value)
            raise ConfigError("start_batch", f"{cfg.model} does not train on a batch of "
                              f"{cfg.start_batch}: {str(e).splitlines()[0]}; start at 2") from None


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
    log_dir = repeats.row_logs(run_id)
    launched = 0

    def trial(batch: int) -> dict[str, Any]:
        nonlocal launched
        launched += 1
        try:
            [out] = repeats.launch_all(launches(cfg, run_id, batch, launched), log_dir)
            return out.result["details"]["trial"]
        except LaunchError as e:
            row = _killed_row(cfg, batch, e)
            if row is None:
                raise
            return row

    largest, misfit, found = batch_search.search(trial, cfg.start_batch, cfg.max_batch,
                                                 cfg.memory_limit_bytes(), cfg.confirm)
    known = next((t for t in found.order if t.get("device_name")), {})
    metrics = {
        **batch_search.summary(found, largest, misfit),
        "peak_kind": known.get("peak_kind"),
        "limit_source": "memory_limit" if cfg.memory_limit else "device memory",
        "device_name": known.get("device_name"),
        **{k: known.get(k) for k in ("model_class", "model_source_sha", "model_source")},
        "log_dir": str(log_dir), **step_figures(found, largest),
        **compile_figures(found, largest)}
    metrics["boundary"] = boundary_sentence(metrics, cfg.max_batch)
    trials = [{**t, "process": i + 1} for i, t in enumerate(found.order)]
    return BatchSearch(metrics, {"trials": sorted(trials, key=lambda t: t["batch_size"])})


def step_figures(found: batch_search.Search, largest: int | None) -> dict[str, Any]:
    """What diagnose judges a search by: the steps of the largest batch that fits, the
    median over its processes (a trial makes its batch on the device once, so no step
    waits for data), and the allocator's retries and OOMs there (CUDA's; None on the
    CPU); where no batch fits, only why there is nothing to judge (`steps_not_judged`)."""
    at = [t for t in found.at(largest) if t.get("step_s")] if largest is not None else []
    if not at:
        return {"steps_not_judged": "no batch fits, so no trial's steps to judge"}
    step = statistics.median(t["step_s"] for t in at)
    counted = [t for t in at if t.get("alloc_retries") is not None]
    return {"step_figures_of": f"batch {largest}, the largest that fits (median of {len(at)} "
                               "processes; its batch made on the device once: no data wait)",
            "batch_s": step, "data_s": 0.0, "compute_s": step,
            "device_type": "cuda" if at[0].get("device_total_bytes") else "cpu",
            "alloc_retries": max(t["alloc_retries"] for t in counted) if counted else None,
            "ooms": max(t["ooms"] or 0 for t in counted) if counted else None,
            "peak_reserved_bytes": max((t.get("peak_reserved_bytes") or 0 for t in counted),
                                       default=None)}


def compile_figures(found: batch_search.Search, largest: int | None) -> dict[str, Any]:
    """A compiled search's compile at its largest batch that fits (each trial compiled
    cold: the median of its processes' compile seconds, the most graph breaks and
    recompiles of any), and no break-even: no eager trial ran beside them."""
    at = [t for t in found.at(largest) if t.get("compile_s") is not None] \
        if largest is not None else []
    if not at:
        return {}
    return {"compile_s": statistics.median(t["compile_s"] for t in at),
            "compile_s_of": at[0]["compile_s_of"], "compile_cache": at[0]["compile_cache"],
            "graph_breaks": max(t.get("graph_breaks", 0) for t in at),
            "recompiles": max(t.get("recompiles", 0) for t in at), **compile_cost.no_eager_row()}


def size_text(n: int | None) -> str:
    """Bytes for people: 137.9 GiB, 1015 MiB, 8.59 MiB (MiB below 10 GiB, so that a peak
    near a limit of a few GiB shows where it is)."""
    if n is None:
        return "?"
    for unit, scale, least in (("GiB", 2**30, 10 * 2**30), ("MiB", 2**20, 2**20),
                               ("KiB", 2**10, 2**10)):
        if abs(n) >= least:
            value = n / scale
            return f"{value:.4g} {unit}" if unit == "GiB" else \
                f"{value:.0f} {unit}" if abs(value) >= 100 else f"{value:.3g} {unit}"
    return f"{n} B"


def _peaks(low: int | None, high: int | None) -> str:
    if low is None or high is None:
        return "peak unknown"
    return f"peak {size_text(high)}" if low == high else \
        f"peaks {size_text(low)}-{size_text(high)}"


def boundary_sentence(m: dict[str, Any], cap: int) -> str:
    """The result in words: the largest batch and how many processes it fit in, its
    peaks' spread and margin to the limit; where it stops fitting, in how many; the
    batches between that fit only sometimes."""
    limit = size_text(m["limit_bytes"])
    first, n_first = m["smallest_batch_not_fitting"], m.get("misfit_processes")
    misfit = (f"batch {first} does not fit in {limit} in any of {n_first} processes "
              f"({_peaks(m.get('misfit_peak_min_bytes'), m.get('misfit_peak_max_bytes'))})")
    between = m.get("unreliable_batches")
    shaky = f"; between them, {between}" if between else ""
    if m["largest_batch"] is None:
        if first is None:
            return f"No batch fits in {limit} in every process, and none fails in all{shaky}."
        return (f"No batch tried fits in {limit} in every process: {misfit}"
                f"{'; below it, ' + between if between else ''}.")
    rate = m["largest_batch_samples_per_s"]
    margin = m.get("margin_bytes")
    head = (f"The largest batch that trains is {m['largest_batch']}, in all of "
            f"{m['largest_batch_processes']} processes ("
            f"{_peaks(m.get('largest_batch_peak_min_bytes'), m['largest_batch_peak_bytes'])}"
            + (f", {size_text(margin)} ({margin / m['limit_bytes']:.1%}) under the limit"
               if margin is not None and margin >= 0 and m["limit_bytes"] else "")
            + (f"; {rate:,.1f} samples/s" if rate else "") + ")" + _supports(m))
    if first is None:
        return (f"{head}; it is the max_batch cap ({cap}): the boundary in {limit} lies "
                f"above it{shaky}.")
    return f"{head}; {misfit}{shaky}."


def _supports(m: dict[str, Any]) -> str:
    """What the largest batch's confirmation supports, and, where its margin is below the
    widest spread of peaks seen at one batch, that a rerun may not fit."""
    bound = m.get("largest_batch_fails_at_most")
    text = (f": that supports a failure in at most {bound:.0%} of fresh processes (95%)"
            if bound is not None else "")
    spread, margin = m.get("peak_spread_bytes"), m.get("margin_bytes")
    if spread is not None and margin is not None and margin < spread:
        growth = m.get("growth_bytes_per_sample")
        fewer = (f" (about {math.ceil((spread - margin) / growth)} samples fewer, by the "
                 f"growth measured here: an estimate, not confirmed)" if growth else "")
        text += (f"; but its margin is below the {size_text(spread)} a peak moved between "
                 f"processes at one batch here, so a rerun may not fit: for a margin of that "
                 f"spread take a smaller batch{fewer}, or confirm with more processes")
    return text


def describe(cfg: MemoryAndBatchConfig, result: BatchSearch) -> str:
    m = result.metrics
    shape = cfg.batch_shape()
    inputs = f"{'x'.join(map(str, shape))} inputs" if shape else f"{cfg.dataset} data"
    how = ", ".join(filter(None, [cfg.precision, "channels_last" if cfg.channels_last else "",
                                  f"compile {cfg.compile}" if compiled(cfg.compile) else "",
                                  f"ac {cfg.ac}" if cfg.ac != "none" else ""]))
    tried = m["batches_tried"]
    return (f"{cfg.model} ({how}) on {m['device_name']}, {inputs}, {tried} "
            f"batch{'' if tried == 1 else 'es'} in {m['trials']} processes: {m['boundary']}")
