"""The single-device IO study: one (dataset, variant, mode, workers) setting, measured.

Each repeat builds a fresh model and DataLoader and runs `epochs` epochs; DataLoader
workers start again every epoch, as they did in seed 000. Two kinds of figure come out:

- steady-state throughput: samples / (data + compute time) over the steps after the
  first `warmup_steps` of every epoch (worker start-up and prefetch fill excluded);
- `total_s`: the wall time of all epochs of a repeat, start-up included, which is what
  seed 000's conclusion tables report ("seconds for 5 epochs").

Both are summarised over repeats as median, p10/p90 and a 95% interval of the median.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, field
from typing import Any

import torch

from benchlib import paths
from benchlib.config import SingleDeviceIoConfig
from benchlib.config.choices import IO_MODELS, SHARD_FORMATS
from benchlib.core import envinfo, loops, progress
from benchlib.core.intervals import share_interval
from benchlib.core.models import build_model, describe_model, training_flops
from benchlib.core.stats import summarize
from benchlib.core.throughput import startup_text, window_figures
from benchlib.data import storage
from benchlib.distributed.device import check_device, device_for
from benchlib.errors import ConfigError
from benchlib.studies import checks
from benchlib.studies.repeats import Launch


def launches(cfg: SingleDeviceIoConfig, run_id: str = "interactive") -> list[Launch]:
    """None: the study measures in the kernel it runs in."""
    return []


@dataclass
class IOResult:
    metrics: dict[str, Any]
    repeats: list[dict[str, float]]
    steps: dict[str, list[float]]  # the first repeat's per-step times, warm-up included
    profile: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # a shard row's epochs (io_shards)

    def details(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "steps": self.steps, "profile": self.profile,
                **self.extra}


IN_SHAPE, CLASSES = (1, 28, 28), 10  # the IO data sets' images and labels


def _model(cfg: SingleDeviceIoConfig) -> torch.nn.Module:
    return build_model(cfg.model, IN_SHAPE, cfg.depth, cfg.alpha, model_args=cfg.model_args,
                       num_classes=CLASSES)


def _stepper(cfg: SingleDeviceIoConfig, device: torch.device, seed: int) -> loops.Stepper:
    torch.manual_seed(seed)
    model = _model(cfg) if cfg.mode == "train" else None
    return loops.Stepper(cfg.mode, device, model, cfg.lr, cfg.momentum)


def preflight(cfg: SingleDeviceIoConfig) -> None:
    """Where the row runs: the device is there, the data set prepared, and an epoch of it
    has a timed step after the warm-up (checked before a kernel starts, not inside it);
    in train mode a model of the user's is built and takes a batch of 2 images to one
    score per class (one line naming `model` where it does not)."""
    check_device(cfg.device)
    if cfg.variant in SHARD_FORMATS:  # the shards, where they are: a folder or a store
        from benchlib.studies import io_shards

        _warmup_fits(cfg, io_shards.samples(cfg))
    else:
        entry = checks.data_prepared(cfg.path, cfg.dataset)
        _warmup_fits(cfg, entry["samples"]["train"])
    if cfg.mode == "train" and cfg.model not in IO_MODELS:
        checks.image_model_takes(lambda: _model(cfg), cfg.model, IN_SHAPE, CLASSES)


def model_figures(cfg: SingleDeviceIoConfig) -> dict[str, Any]:
    """What train mode trained: its class, parameters, identity (the hash `compare` reads)
    and FLOPs per sample (PyTorch's count of one training step); traverse mode trains
    nothing: none."""
    if cfg.mode != "train":
        return {"model_class": None, "model_params": None, "model_source_sha": None,
                "flops_per_sample": None}
    torch.manual_seed(cfg.seed)
    model = _model(cfg)
    x, y = torch.rand(2, *IN_SHAPE), torch.randint(0, CLASSES, (2,))
    return {**describe_model(cfg.model, model, cfg.model_args),
            "flops_per_sample": training_flops(model, x, y)}


def _warmup_fits(cfg: SingleDeviceIoConfig, samples: int) -> tuple[int, str]:
    """The warm-up steps and why, if an epoch of `samples` has a step after them."""
    steps_per_epoch = math.ceil(samples / cfg.batch_size)
    warmup, warmup_why = loops.steady_state_warmup(cfg.warmup_steps, cfg.num_workers)
    if warmup >= steps_per_epoch:
        raise ConfigError("warmup_steps", f"{warmup} leaves no timed step: an epoch of "
                          f"{samples} samples has {steps_per_epoch} steps"
                          + ("" if warmup == cfg.warmup_steps else f" ({warmup_why})"))
    return warmup, warmup_why


def run(cfg: SingleDeviceIoConfig, run_id: str = "interactive") -> IOResult:
    preflight(cfg)
    device = device_for(cfg.device)
    shards: dict[str, Any] = {}
    shard_details: dict[str, Any] = {}
    if cfg.variant in SHARD_FORMATS:
        from benchlib.studies import io_shards

        prepared = storage.Prepared(None, None, cfg.variant, io_shards.samples(cfg), "shards",
                                    0.0)
    else:
        prepared = storage.prepare(cfg.dataset, cfg.variant, cfg.path)
    warmup, warmup_why = _warmup_fits(cfg, prepared.samples)
    steps_per_epoch = math.ceil(prepared.samples / cfg.batch_size)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    if cfg.variant in SHARD_FORMATS:
        repeats_read = io_shards.measure(cfg, device, lambda r: _stepper(cfg, device, cfg.seed + r),
                                         warmup)
        timed = io_shards.timed(repeats_read)
        shards = io_shards.figures(cfg, repeats_read)
        shard_details = io_shards.details(repeats_read)
    else:
        timed = _measure(cfg, prepared, device, warmup)
    repeats, all_data, all_compute, epochs, first_steps, losses = timed
    step_s = [d + c for d, c in zip(all_data, all_compute)]
    steady = summarize([r["samples_per_s"] for r in repeats], "samples_per_s", independent=False)
    data_share = share_interval(all_data, step_s)
    metrics: dict[str, Any] = {
        **steady,
        **summarize([r["total_s"] for r in repeats], "total_s", independent=False),
        **{k: v for k, v in summarize(step_s, "step_s").items() if not k.startswith("step_s_ci")},
        "data_s": summarize(all_data, "data_s")["data_s"],
        "compute_s": summarize(all_compute, "compute_s")["compute_s"],
        # epoch_s, first_batch_s, warmup_s, epoch_samples_per_s (medians over the epochs)
        # and the start-up gap: the steady rate against the whole epoch's
        **window_figures(epochs, steady["samples_per_s"]),
        **dict(zip(("data_share", "data_share_low", "data_share_high"), data_share)),
        **dict(zip(("compute_share", "compute_share_low", "compute_share_high"),
                   (1 - data_share[0], 1 - data_share[2], 1 - data_share[1]))),
        "global_batch": cfg.batch_size,
        "samples": prepared.samples,
        "steps_per_epoch": steps_per_epoch,
        "warmup_steps_excluded": warmup,
        "warmup_reason": warmup_why,
        "prepare_s": prepared.prepare_s,
        "data_source": prepared.source,
        "device_name": envinfo.device_name(device),
        "peak_mem_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "loss_first": losses[0][0],
        "loss_last": losses[-1][1],
        "trace_path": None,
        **model_figures(cfg),
        **shards,
    }
    result = IOResult(metrics, repeats, first_steps, extra=shard_details)
    if cfg.profile and cfg.variant not in SHARD_FORMATS:
        trace = paths.outputs_dir() / "traces" / f"{run_id}.json" if cfg.export_trace else None
        step = _stepper(cfg, device, cfg.seed)
        loader = loops.make_loader(prepared.dataset, prepared.collate_fn, cfg.batch_size,
                                   cfg.num_workers, device, cfg.seed, lean=True)
        result.profile = loops.profile_steps(loader, step, min(steps_per_epoch,
                                                               cfg.warmup_steps + 20), trace)
        metrics["trace_path"] = str(trace) if trace else None
    return result


def _measure(cfg: SingleDeviceIoConfig, prepared: storage.Prepared, device: torch.device,
             warmup: int) -> tuple[list[dict[str, float]], list[float], list[float], list[float],
                                   dict[str, Any], list[tuple[float, float]]]:
    """Every repeat's epochs, timed: each repeat's totals, every timed step's data and compute
    seconds, each epoch's wall time, first batch, warm-up and whole-epoch rate, the first
    epoch's steps, each epoch's first and last loss."""
    repeats, all_data, all_compute, epochs, first_steps, losses = [], [], [], [], {}, []
    bar = progress.bar(cfg.repeats * cfg.epochs, f"{cfg.dataset} {cfg.variant} {cfg.mode}",
                       unit="epoch")
    for r in range(cfg.repeats):
        step = _stepper(cfg, device, cfg.seed + r)
        loader = loops.make_loader(prepared.dataset, prepared.collate_fn, cfg.batch_size,
                                   cfg.num_workers, device, cfg.seed + r, lean=True)
        data_s, compute_s, samples, total_s = [], [], 0, 0.0
        for _ in range(cfg.epochs):
            times = loops.run_epoch(loader, step, warmup)
            d, c, n = times.timed()
            data_s += d
            compute_s += c
            samples += sum(n)
            total_s += times.epoch_s
            epochs.append({"epoch_s": times.epoch_s, "first_batch_s": times.data_s[0],
                           "warmup_s": sum(times.data_s[:warmup]) + sum(times.compute_s[:warmup]),
                           "epoch_samples_per_s": sum(times.samples) / times.epoch_s,
                           # the window this epoch timed: its steady rate and start-up gap
                           "samples_per_s": sum(n) / (sum(d) + sum(c)),
                           "epoch_steps": len(times.samples), "window_steps": len(n),
                           "window_samples": sum(n), "epoch_samples": sum(times.samples)})
            if not first_steps:
                first_steps = {"data_s": times.data_s, "compute_s": times.compute_s,
                               "warmup": times.warmup}
            losses.append((times.loss_first, times.loss_last))
            bar.update()
        repeats.append({"repeat": r, "samples_per_s": samples / (sum(data_s) + sum(compute_s)),
                        "total_s": total_s, "data_s": sum(data_s), "compute_s": sum(compute_s)})
        all_data += data_s
        all_compute += compute_s
    bar.close()
    return repeats, all_data, all_compute, epochs, first_steps, losses


def steps_frame(result: IOResult):
    """The first repeat's steps as a DataFrame (ms), for a plot of where step time goes."""
    import pandas as pd

    s = result.steps
    return pd.DataFrame({"step": range(1, len(s["data_s"]) + 1),
                         "data_ms": [v * 1e3 for v in s["data_s"]],
                         "compute_ms": [v * 1e3 for v in s["compute_s"]],
                         "warmup": s["warmup"]})


def describe(cfg: SingleDeviceIoConfig, result: IOResult) -> str:
    """One line a person reads: what ran, and its headline numbers with spread."""
    m = result.metrics
    line = (f"{cfg.dataset} {cfg.variant} {cfg.mode} on {m['device_name']}, "
            f"num_workers={cfg.num_workers}: {m['samples_per_s']:,.0f} samples/s steady "
            f"(p10 {m['samples_per_s_p10']:,.0f}, p90 {m['samples_per_s_p90']:,.0f}), "
            f"{m['epoch_samples_per_s']:,.0f} over the whole epoch, first batch after "
            f"{m['first_batch_s']:.3g} s; {cfg.epochs} epochs in {m['total_s']:.2f} s (median "
            f"of {cfg.repeats}); data {m['data_share']:.0%} of step time")
    hidden = startup_text(m)
    if m.get("epoch1_samples_per_s") is not None:
        from benchlib.studies import io_shards

        line += "\n  " + io_shards.sentence(m)
    return line + (f"\n  {hidden}" if hidden else "")
