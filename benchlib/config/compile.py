"""The compile study's parameters (notebook 55_compile)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from benchlib.config.base import require_min
from benchlib.config.performance import PerformanceConfig
from benchlib.config.training import TrainingConfig
from benchlib.errors import ConfigError


@dataclasses.dataclass
class CompileConfig(TrainingConfig, PerformanceConfig):
    """Is torch.compile worth it for this job (notebook 55): one model trained by one
    process, eager and compiled in `compile`'s mode, each launched `repeats` times in
    fresh processes, interleaved, on the same seeds and data. Its figures: the compile's
    seconds (the first `warmup_steps` steps' time less eager's), cold or warm
    (`compile_cache`), the steady speedup, the steps after which compiling pays off, graph
    breaks and recompiles, peak memory and the loss after the run's steps against eager's.

    The model, data and schedule are benchlib.config.training's (any model a training
    study trains: built-in, `pkg.module:function`, timm: or hf:), the compile mode and
    cache benchlib.config.performance's."""

    defaults: ClassVar[dict[str, Any]] = {"model": "simplecnn", "dataset": "synthetic",
                                          "image_size": 32, "batch_size": 32, "max_steps": 30,
                                          "warmup_steps": 3, "lr": 0.01, "compile": "default"}

    repeats: int = 5  # benchlib.core.stats.MIN_LAUNCHES: the fewest that give an interval
    """Launches a side (eager and compiled), interleaved; launch r of each side trains on
    seed + r. 5 or more give intervals (fewer: the range)."""

    def validate(self) -> None:
        super().validate()
        require_min("repeats", self.repeats, 1)
        if self.compile == "off":
            raise ConfigError("compile", "off compares eager with itself; give the mode to "
                              "measure: default, reduce-overhead, max-autotune or regional")
