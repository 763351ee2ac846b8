"""The single_device_io study's parameters (notebook 10_single_device_io and `python -m benchlib io`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_choice, require_min
from benchlib.config.choices import IO_DATASETS, IO_MODELS, MODES, VARIANTS, model_kind
from benchlib.config.model_data import ModelDataConfig
from benchlib.config.training import LoaderConfig, ScheduleConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class SingleDeviceIoConfig(ScheduleConfig, LoaderConfig, ModelDataConfig):
    """Single-device IO (notebook 10, `python -m benchlib io`): seed 000's singlegpu.py
    and test_funcs.py. The model and data, the loader and the schedule are the training
    studies' (benchlib.config.model_data, benchlib.config.training), with seed 000's
    defaults: its data sets, 1x28x28 images of 10 classes, SGD without momentum."""

    defaults: ClassVar[dict[str, Any]] = {"dataset": "fashion-mnist", "model": "toynet",
                                          "batch_size": 64, "warmup_steps": 5, "lr": 1e-3,
                                          "momentum": 0.0}

    variant: str = "raw"
    """Storage variant: raw, preload, preload_batched, tensorclass, tensorclass_memmap, np_memmap."""
    mode: str = "train"
    """traverse (iterate and move batches) or train (the full step)."""
    repeats: int = 3
    """Independent repeats, each with a fresh DataLoader (seed 000: 10)."""
    profile: bool = False
    """Run extra steps under torch.profiler and show the top operators."""
    export_trace: bool = False
    """Write the profiled steps as a Chrome trace under outputs/traces/."""

    def validate(self) -> None:
        # checked here, not as the flags' choices: `benchlib io` says them in its one line
        require_choice("dataset", self.dataset, IO_DATASETS)
        require_choice("variant", self.variant, VARIANTS)
        require_choice("mode", self.mode, MODES)
        if self.model not in IO_MODELS and model_kind(self.model) not in ("entry", "timm"):
            raise ConfigError("model", f"{self.model!r} is not one of {', '.join(IO_MODELS)}, "
                              "nor pkg.module:function or timm:NAME (1x28x28 inputs, 10 classes)")
        if self.model_args and self.model in IO_MODELS:
            raise ConfigError("model_args", f"{self.model} is built in and takes none; "
                              "model_args are for pkg.module:function and timm:NAME")
        super().validate()
        require_min("repeats", self.repeats, 1)
        if self.export_trace and not self.profile:
            raise ConfigError("export_trace", "needs profile = True (the trace is the profiled steps)")
