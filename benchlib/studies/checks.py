"""The runtime checks the studies' preflights share: they ask this machine (its GPUs,
its cores, the data prepared on it), so they run where a row runs, never where a plan
is only loaded (a Slurm login node)."""

from __future__ import annotations

import math
from typing import Any

from benchlib.config.choices import MADE_ON_DEVICE, SYNTHETIC_STEPS
from benchlib.core import hostload
from benchlib.data.manifest import describe
from benchlib.distributed.device import choose_backend, uses_cuda
from benchlib.errors import ConfigError


def device_and_backend(device: str, backend: str) -> bool:
    """The device exists here and the backend suits it; True when that is CUDA."""
    cuda = uses_cuda(device)
    choose_backend("cuda" if cuda else "cpu", backend)
    return cuda


def visible_devices(cuda: bool) -> int:
    import torch

    return torch.cuda.device_count() if cuda else hostload.job_cores()  # a Slurm cpuset's


def ranks_fit(field: str, ranks: int, cuda: bool) -> None:
    """One rank per GPU, or per CPU core: more would share a device and measure that."""
    visible = visible_devices(cuda)
    if ranks > visible:
        what = "GPUs are visible" if cuda else "CPU cores are this job's (one rank each)"
        raise ConfigError(field, f"{ranks} ranks asked for on this host, but only {visible} {what}")


def data_prepared(path: str, dataset: str) -> dict[str, Any]:
    """The manifest entry of a prepared data set; UsageError naming `benchlib data` if not."""
    return describe(path, dataset)


def own_job(cfg: Any) -> Any:
    """The user's model and data (a trainers.job.Job), built here on the CPU as every rank
    will build them; None where both are built in. Built once, for every check below."""
    from benchlib.trainers.job import build_job, uses_own_code

    return build_job(cfg) if uses_own_code(cfg) else None


def own_code_trains(cfg: Any, job: Any = None) -> int | None:
    """The user's model and data (`job`, else built here: own_job) take a training step's
    forward and loss on a batch of 2: a module that is not importable, a function that
    does not return a module or a data set, items that are not tensors, a model whose
    output does not fit the labels, all end here, before any rank starts.
    The number of samples in the user's data set (None: synthetic or built in)."""
    if job is None:
        job = own_job(cfg)
    if job is None:
        return None
    job.check(cfg.model)
    return len(job.dataset) if job.dataset is not None else None


def steps_fit(cfg: Any, per_step: int, samples: int | None = None) -> None:
    """The data is there, and an epoch has a timed step after the warm-up (`samples`: the
    size of a data set of the user's, which has no manifest, or of the job built already)."""
    steps = cfg.max_steps or SYNTHETIC_STEPS
    if cfg.dataset not in MADE_ON_DEVICE:
        if samples is None and cfg.dataset == "tokenfile":
            samples = tokenfile_windows(cfg)
        elif samples is None:
            samples = data_prepared(cfg.path, cfg.dataset)["samples"]["train"]
        steps = min(steps, math.ceil(samples / per_step)) if cfg.max_steps else \
            math.ceil(samples / per_step)
    if cfg.warmup_steps >= steps:
        raise ConfigError("warmup_steps", f"{cfg.warmup_steps} leaves no timed step: an "
                          f"epoch here has {steps} steps")


def tokenfile_windows(cfg: Any) -> int:
    """The windows of seq_len + 1 tokens an epoch of the tokenfile reads, from the job built
    on the meta device (no memory, no time): it refuses a model whose vocabulary does not
    hold the data's largest id, a seq_len longer than train.bin, a folder never prepared."""
    import torch

    from benchlib.trainers.job import build_job

    with torch.device("meta"):
        return len(build_job(cfg).dataset)


def fsdp2_available() -> None:
    """FSDP2 (`torch.distributed.fsdp.fully_shard`, torch 2.6 and later) in this torch."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        import torch

        raise ConfigError("strategy", f"fsdp2 needs torch.distributed.fsdp.fully_shard (torch "
                          f">= 2.6); this torch is {torch.__version__}: use ddp") from None


def blocks_fit(cfg: Any, job: Any = None) -> None:
    """Activation checkpointing, FSDP2 and regional compile work block by block: the model
    must have them (the user's, as own_job built it; else built on the meta device: no
    memory, no time)."""
    strategy = getattr(cfg, "strategy", "single")
    field, value = ("ac", cfg.ac) if cfg.ac != "none" else ("strategy", "fsdp2") \
        if strategy == "fsdp2" else ("compile", "regional")
    if cfg.ac == "none" and strategy != "fsdp2" and getattr(cfg, "compile", "off") != "regional":
        return
    from benchlib.distributed import fsdp

    if job is not None:
        model = job.model
    else:
        import torch

        from benchlib.trainers.job import build_job

        with torch.device("meta"):
            model = build_job(cfg).model
    fsdp.require_blocks(model, field, value)


def image_model_takes(build: Any, name: str, shape: tuple[int, ...], classes: int) -> None:
    """A model of the user's (`build()` makes it, on the CPU) takes a batch of 2 images of
    `shape` to one score per class, at least `classes` of them: one line naming `model`
    where it does not, before anything is timed."""
    import torch

    where = f"2 images of {'x'.join(map(str, shape))}"
    try:
        with torch.no_grad():
            out = build().eval()(torch.zeros(2, *shape))
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the user's forward raises
        raise ConfigError("model", f"{name} fails on {where}: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:200]}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, out.shape[-1]) \
            or out.shape[-1] < classes:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ConfigError("model", f"{name} gives {got} for {where}; training needs (2, >= "
                          f"{classes}) scores (set num_classes or in_channels in model_args)")


def fp8_fits(cfg: Any, cuda: bool, job: Any = None) -> None:
    """A float8 row: torchao installed, a model with linear layers to convert (the user's,
    as own_job built it; else built on the meta device), and a measured filter only where
    the per-layer table can decide (a CPU's FP8 runs emulated)."""
    from benchlib.config.choices import FP8_RECIPES

    if getattr(cfg, "precision", "") not in FP8_RECIPES:
        return
    from benchlib.trainers import fp8

    fp8.torchao()
    if job is not None:
        model = job.model
    else:
        import torch

        from benchlib.trainers.job import build_job

        with torch.device("meta"):
            model = build_job(cfg).model
    fp8.require_linears(model, cfg.precision)
    if cfg.fp8_filter == "measured" and not cuda:
        raise ConfigError("fp8_filter", "measured: on a CPU the per-layer table's FP8 side "
                          "runs emulated and decides nothing; use auto, none or names")
